import type { MiddlewareConfig } from '../config/types.js';
import { MiddlewareIndex } from './middleware-index.js';
import type { PathPattern } from './path-pattern.js';
import type { MiddlewareBinding, OwnerSnapshot, PeerEndpoint, TriggerRecord } from './registrations.js';
import { compareRegistration } from './registrations.js';
import { MAIN_PRINCIPAL, isRestricted } from './principal.js';
import { Router } from './router.js';

/** One routable binding: the winner among triggers of the same method and path shape. */
export interface HttpRoute {
  method: string;
  pattern: PathPattern;
  /** `api_path` as the worker registered it: the request's `trigger.path` (docs/http.md). */
  apiPath: string;
  triggerId: string;
  functionId: string;
  ownerId: string;
  conditionFunctionId?: string;
  middlewareFunctionIds?: readonly string[];
  /** Who registered the binding (worker-session.ts): restricted middleware only runs on its own principal's routes. */
  principal: string;
  /** The worker that registered the binding (admin view). */
  workerId: string;
  /** The trigger's `metadata`: the handler gets it as its invocation's metadata (as iii does). */
  metadata?: Record<string, unknown>;
}

/**
 * A registration that lost to an older one (docs/security.md#route-ownership): the process that holds
 * it (`ownerId`) drops it and tells its worker. `id` is the trigger id (route) or the function id.
 */
export interface RegistrationConflict {
  kind: 'route' | 'function';
  ownerId: string;
  workerId: string;
  id: string;
  reason: string;
  /**
   * The owner of the registration it lost to. When that is `ownerId` itself, or an owner whose
   * snapshot this table held already before the build that found the conflict, the conflict is
   * visible to the process that must refuse: it refuses at once (conflict-refusals.ts).
   */
  holderOwnerId: string;
  /**
   * The registration it lost to is of the same principal: the holder's worker may be leaving (a
   * reconnect or redeploy takes the route back), so a holder on another process is checked against a
   * fresh table first (conflict-refusals.ts).
   */
  samePrincipal: boolean;
}

/** An immutable view of the whole table; a request keeps the one it started with. */
export interface RoutingState {
  version: number;
  router: Router<HttpRoute>;
  /** The routes the router serves (admin view). */
  routes: readonly HttpRoute[];
  /** Middleware selection by phase and path, built with the router. */
  middleware: MiddlewareIndex;
  /** function id → owner ids that have at least one worker registering it. */
  functionOwners: ReadonlyMap<string, readonly string[]>;
  /**
   * Functions no connected worker serves whose worker departed within the reconnect grace: a call
   * to one of them waits for it to be registered again (src/invocation/grace-invoker.ts).
   */
  awaitedFunctions: ReadonlySet<string>;
  /** Each function's metadata as registered (expose_functions' metadata filters). */
  functionMetadata: ReadonlyMap<string, Record<string, unknown>>;
  /** Registrations that lost to an older holder; each owner drops its own (engine.ts). */
  conflicts: readonly RegistrationConflict[];
  /**
   * Remote owners whose snapshot arrived (or was removed) since the previous build. A conflict whose
   * holder is not among them was already in this table before: it is refused at once (conflict-refusals.ts).
   */
  changedOwners: ReadonlySet<string>;
}

/** The local process's registrations, pulled only when the table rebuilds. */
export interface SnapshotSource {
  readonly ownerId: string;
  snapshot(): OwnerSnapshot;
}

type Listener = (state: RoutingState) => void;

/**
 * The replicated table: one snapshot per owner, and the router derived from all of them. Changes only
 * mark the table dirty; the next read rebuilds once, so a burst of registrations costs one build.
 */
export class RouteTable {
  private readonly remote = new Map<string, OwnerSnapshot>();
  private local: SnapshotSource | undefined;
  private dirty = false;
  private scheduled = false;
  private state: RoutingState;
  private buildCount = 0;
  /** Remote owners changed since the last build (RoutingState.changedOwners). */
  private changedOwners = new Set<string>();
  private readonly listeners = new Set<Listener>();

  private readonly configMiddleware: readonly MiddlewareBinding[];

  /**
   * `configMiddleware` (RestApiModule `middleware`) applies to every route; it sorts before
   * trigger-registered middleware of equal priority, in configuration order.
   */
  constructor(
    private readonly ignoreTrailingSlash: boolean,
    configMiddleware: readonly MiddlewareConfig[] = [],
  ) {
    this.configMiddleware = configMiddleware.map((entry, index) => ({
      triggerId: `config:${index}`,
      functionId: entry.functionId,
      ownerId: 'config',
      phase: entry.phase,
      priority: entry.priority,
      registeredAt: 0,
      seq: index,
    }));
    this.state = this.build();
  }

  setLocalSource(source: SnapshotSource): void {
    this.local = source;
    this.markChanged();
  }

  /** Called by the local registry on any change of its registrations. */
  markChanged(): void {
    this.dirty = true;
    if (this.scheduled) return;
    this.scheduled = true;
    // Also rebuild soon without waiting for a request, so listeners (admin, bus) see the change.
    setImmediate(() => {
      this.scheduled = false;
      this.current();
    });
  }

  /** Stores a peer's snapshot if it is newer than the one held; returns whether it was applied. */
  applySnapshot(snapshot: OwnerSnapshot): boolean {
    const held = this.remote.get(snapshot.ownerId);
    if (held !== undefined && held.version >= snapshot.version) return false;
    this.remote.set(snapshot.ownerId, snapshot);
    this.changedOwners.add(snapshot.ownerId);
    this.markChanged();
    return true;
  }

  /** Where a remote owner's forward listener is, as its snapshot advertised. */
  endpointOf(ownerId: string): PeerEndpoint | undefined {
    return this.remote.get(ownerId)?.endpoint;
  }

  /** Every snapshot held, the local one included (admin view). */
  snapshotsHeld(): OwnerSnapshot[] {
    return this.snapshots();
  }

  /** Owners whose snapshot is held, with their versions (readiness and the admin view). */
  ownerVersions(): Map<string, number> {
    return new Map([...this.remote].map(([ownerId, snapshot]) => [ownerId, snapshot.version]));
  }

  removeOwner(ownerId: string): boolean {
    const removed = this.remote.delete(ownerId);
    if (removed) {
      this.changedOwners.add(ownerId);
      this.markChanged();
    }
    return removed;
  }

  current(): RoutingState {
    if (this.dirty) {
      this.dirty = false;
      this.state = this.build();
      for (const listener of this.listeners) listener(this.state);
    }
    return this.state;
  }

  onChange(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private snapshots(): OwnerSnapshot[] {
    const all = [...this.remote.values()];
    if (this.local !== undefined) all.push(this.local.snapshot());
    return all;
  }

  private build(): RoutingState {
    const snapshots = this.snapshots();
    const conflicts: RegistrationConflict[] = [];
    const functionHolders = holdersOfFunctions(snapshots, conflicts);
    const functionOwners = new Map<string, string[]>();
    const functionMetadata = new Map<string, Record<string, unknown>>();
    for (const snapshot of snapshots) {
      for (const fn of snapshot.functions) {
        if (functionHolders.get(fn.id) !== (fn.principal ?? MAIN_PRINCIPAL)) continue;
        if (fn.metadata !== undefined && !functionMetadata.has(fn.id)) functionMetadata.set(fn.id, fn.metadata);
        const owners = functionOwners.get(fn.id);
        if (owners === undefined) functionOwners.set(fn.id, [snapshot.ownerId]);
        else if (!owners.includes(snapshot.ownerId)) owners.push(snapshot.ownerId);
      }
    }

    const awaitedFunctions = new Set<string>();
    for (const snapshot of snapshots) {
      for (const departed of snapshot.departed ?? []) {
        for (const id of departed.functionIds) if (!functionOwners.has(id)) awaitedFunctions.add(id);
      }
    }

    const byShape = new Map<string, Candidate[]>();
    const middleware: MiddlewareBinding[] = [...this.configMiddleware];
    for (const { ownerId, trigger, departed } of triggersOf(snapshots)) {
      if (trigger.type === 'http_middleware') {
        // A departed worker's middleware stands in only while its function is awaited: once a
        // worker serves it again, that worker's own registration is the binding (no double run).
        if (departed && !awaitedFunctions.has(trigger.functionId)) continue;
        middleware.push({
          triggerId: trigger.id,
          functionId: trigger.functionId,
          ownerId,
          ...(isRestricted(trigger.principal) ? { restrictedTo: trigger.principal } : {}),
          phase: trigger.middleware.phase,
          ...(trigger.middleware.scopePath !== undefined ? { scopePath: trigger.middleware.scopePath } : {}),
          priority: trigger.middleware.priority,
          registeredAt: trigger.registeredAt,
          seq: trigger.seq,
        });
        continue;
      }
      const key = `${trigger.http.httpMethod} ${trigger.http.pattern.shapeKey}`;
      const candidate: Candidate = { trigger, ownerId, departed, live: functionOwners.has(trigger.functionId) };
      const group = byShape.get(key);
      if (group === undefined) byShape.set(key, [candidate]);
      else group.push(candidate);
    }

    const winners = new Map<string, Candidate>();
    for (const [key, group] of byShape) winners.set(key, routeHolder(group, conflicts));

    // A departed worker's function whose every trigger was a route binding now served by a live one
    // is not awaited: nothing should wait for it (a call still routed to it fails at once).
    for (const id of supersededDepartedFunctions(snapshots, awaitedFunctions, winners)) awaitedFunctions.delete(id);

    const routes: HttpRoute[] = [];
    for (const { trigger, ownerId } of winners.values()) {
      const route: HttpRoute = {
        method: trigger.http.httpMethod,
        pattern: trigger.http.pattern,
        apiPath: trigger.http.apiPath,
        triggerId: trigger.id,
        functionId: trigger.functionId,
        ownerId,
        principal: trigger.principal ?? MAIN_PRINCIPAL,
        workerId: trigger.workerId,
      };
      if (trigger.http.conditionFunctionId !== undefined) route.conditionFunctionId = trigger.http.conditionFunctionId;
      if (trigger.metadata !== undefined) route.metadata = trigger.metadata;
      if (trigger.http.middlewareFunctionIds !== undefined) {
        route.middlewareFunctionIds = trigger.http.middlewareFunctionIds;
      }
      routes.push(route);
    }
    this.buildCount++;
    let changedOwners: ReadonlySet<string> = NO_OWNERS;
    if (this.changedOwners.size > 0) {
      changedOwners = this.changedOwners;
      this.changedOwners = new Set();
    }
    return {
      version: this.buildCount,
      router: new Router(routes, this.ignoreTrailingSlash),
      routes,
      middleware: new MiddlewareIndex(middleware, this.ignoreTrailingSlash),
      functionOwners,
      awaitedFunctions,
      functionMetadata,
      conflicts,
      changedOwners,
    };
  }
}

const NO_OWNERS: ReadonlySet<string> = new Set();

type HttpTrigger = TriggerRecord & { type: 'http' };

interface Candidate {
  trigger: HttpTrigger;
  ownerId: string;
  /** From a worker gone within the reconnect grace. */
  departed: boolean;
  /** Its function is served by a connected worker. */
  live: boolean;
}

const byAge = (a: Candidate, b: Candidate): number => compareRegistration({ ...a.trigger, ownerId: a.ownerId }, { ...b.trigger, ownerId: b.ownerId });
const principalOf = (candidate: Candidate): string => candidate.trigger.principal ?? MAIN_PRINCIPAL;

/**
 * Route ownership (docs/security.md#route-ownership): the oldest binding of a method and path shape
 * holds it for its principal — also while its worker is away within the reconnect grace. Bindings of
 * the holder's principal with the same function and path are replicas; every other binding registered
 * by a connected worker is a conflict, refused by its owner (iii refuses a same-shape route with other
 * parameter names; Switchyard also refuses another function or principal instead of letting it take
 * the route). Within the holder's principal a reconnecting worker's binding replaces a departed one,
 * even with another function (a redeploy may rename it). Among replicas the newest live one serves.
 */
function routeHolder(group: Candidate[], conflicts: RegistrationConflict[]): Candidate {
  group.sort(byAge);
  const oldest = group[0] as Candidate;
  const principal = principalOf(oldest);
  const first = group.find((candidate) => !candidate.departed && principalOf(candidate) === principal);
  const reference = first ?? oldest;
  const compatible = (candidate: Candidate): boolean =>
    principalOf(candidate) === principal &&
    candidate.trigger.functionId === reference.trigger.functionId &&
    candidate.trigger.http.pattern.source === reference.trigger.http.pattern.source;
  // Sorted by age, so the last compatible binding seen is the newest (an exact tie cannot occur: two
  // bindings of one owner differ in their sequence number). The reference is its own first candidate.
  let winner = reference;
  for (const candidate of group) {
    if (candidate.departed) {
      // A departed binding stands in until its principal registers the route again.
      if (first === undefined && compatible(candidate)) winner = candidate;
      continue;
    }
    if (!compatible(candidate)) {
      conflicts.push({
        kind: 'route',
        ownerId: candidate.ownerId,
        workerId: candidate.trigger.workerId,
        id: candidate.trigger.id,
        holderOwnerId: reference.ownerId,
        samePrincipal: principalOf(candidate) === principal,
        reason: `route ${candidate.trigger.http.httpMethod} ${candidate.trigger.http.apiPath} conflicts with ${reference.trigger.http.httpMethod} ${reference.trigger.http.apiPath}, registered earlier for function ${reference.trigger.functionId}${principalOf(candidate) === principal ? '' : ' by another principal'}; the earlier registration keeps the route`,
      });
      continue;
    }
    winner = candidate;
  }
  return winner;
}

/**
 * Which principal holds each function id: the oldest claim's — a connected worker's registration, or
 * a worker away within the reconnect grace (dated by when it connected, since its registrations came
 * later). Registrations of any other principal are conflicts: another principal cannot become a
 * replica of a function and take a share of its calls (docs/security.md).
 */
function holdersOfFunctions(snapshots: readonly OwnerSnapshot[], conflicts: RegistrationConflict[]): Map<string, string> {
  const holders = new Map<string, { principal: string; at: number; ownerId: string; workerId: string }>();
  const claim = (id: string, principal: string, at: number, ownerId: string, workerId: string): void => {
    const held = holders.get(id);
    if (held === undefined || at < held.at || (at === held.at && (ownerId < held.ownerId || (ownerId === held.ownerId && workerId < held.workerId)))) {
      holders.set(id, { principal, at, ownerId, workerId });
    }
  };
  for (const snapshot of snapshots) {
    for (const departed of snapshot.departed ?? []) {
      // Registered no earlier than its worker connected.
      for (const id of departed.functionIds) claim(id, departed.principal ?? MAIN_PRINCIPAL, departed.since ?? 0, snapshot.ownerId, departed.workerId);
    }
    for (const fn of snapshot.functions) claim(fn.id, fn.principal ?? MAIN_PRINCIPAL, fn.registeredAt ?? 0, snapshot.ownerId, fn.workerId);
  }
  const result = new Map<string, string>();
  for (const [id, held] of holders) result.set(id, held.principal);
  for (const snapshot of snapshots) {
    for (const fn of snapshot.functions) {
      if ((fn.principal ?? MAIN_PRINCIPAL) === result.get(fn.id)) continue;
      conflicts.push({
        kind: 'function',
        ownerId: snapshot.ownerId,
        workerId: fn.workerId,
        id: fn.id,
        holderOwnerId: holders.get(fn.id)?.ownerId ?? snapshot.ownerId,
        samePrincipal: false,
        reason: `function ${fn.id} is registered by another principal already`,
      });
    }
  }
  return result;
}

/** Awaited functions all of whose departed triggers are route bindings that lost to a live binding. */
function supersededDepartedFunctions(
  snapshots: readonly OwnerSnapshot[],
  awaited: ReadonlySet<string>,
  byShape: ReadonlyMap<string, { trigger: TriggerRecord; live: boolean }>,
): Set<string> {
  const superseded = new Set<string>();
  const needed = new Set<string>();
  for (const snapshot of snapshots) {
    for (const gone of snapshot.departed ?? []) {
      for (const trigger of gone.triggers) {
        if (!awaited.has(trigger.functionId)) continue;
        const winner = trigger.type === 'http' ? byShape.get(`${trigger.http.httpMethod} ${trigger.http.pattern.shapeKey}`) : undefined;
        // A live winner is another binding: this trigger's own function is awaited, so not live.
        if (winner !== undefined && winner.live) superseded.add(trigger.functionId);
        else needed.add(trigger.functionId);
      }
    }
  }
  for (const id of needed) superseded.delete(id);
  return superseded;
}

/** Every trigger of every snapshot, those of departed workers last and marked. */
function* triggersOf(
  snapshots: readonly OwnerSnapshot[],
): Generator<{ ownerId: string; trigger: TriggerRecord; departed: boolean }> {
  for (const snapshot of snapshots) {
    for (const trigger of snapshot.triggers) yield { ownerId: snapshot.ownerId, trigger, departed: false };
  }
  for (const snapshot of snapshots) {
    for (const gone of snapshot.departed ?? []) {
      for (const trigger of gone.triggers) yield { ownerId: snapshot.ownerId, trigger, departed: true };
    }
  }
}
