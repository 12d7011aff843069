import type { MiddlewareConfig } from '../config/types.js';
import { MiddlewareIndex } from './middleware-index.js';
import type { PathPattern } from './path-pattern.js';
import type { MiddlewareBinding, OwnerSnapshot, PeerEndpoint, TriggerRecord } from './registrations.js';
import { compareRegistration } from './registrations.js';
import { Router } from './router.js';

/** One routable binding: the winner among triggers of the same method and path shape. */
export interface HttpRoute {
  method: string;
  pattern: PathPattern;
  triggerId: string;
  functionId: string;
  ownerId: string;
  conditionFunctionId?: string;
  middlewareFunctionIds?: readonly string[];
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
    if (removed) this.markChanged();
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
    const functionOwners = new Map<string, string[]>();
    for (const snapshot of snapshots) {
      for (const fn of snapshot.functions) {
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

    const byShape = new Map<string, { trigger: TriggerRecord & { type: 'http' }; ownerId: string; live: boolean }>();
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
          phase: trigger.middleware.phase,
          ...(trigger.middleware.scopePath !== undefined ? { scopePath: trigger.middleware.scopePath } : {}),
          priority: trigger.middleware.priority,
          registeredAt: trigger.registeredAt,
          seq: trigger.seq,
        });
        continue;
      }
      const key = `${trigger.http.httpMethod} ${trigger.http.pattern.shapeKey}`;
      const live = functionOwners.has(trigger.functionId);
      const held = byShape.get(key);
      // The newest live binding wins; a dead binding only wins when nothing live is bound.
      if (
        held === undefined ||
        (live && !held.live) ||
        (live === held.live &&
          compareRegistration({ ...trigger, ownerId }, { ...held.trigger, ownerId: held.ownerId }) > 0)
      ) {
        byShape.set(key, { trigger, ownerId, live });
      }
    }

    // A departed worker's function whose every trigger was a route binding now served by a live one
    // is not awaited: nothing should wait for it (a call still routed to it fails at once).
    for (const id of supersededDepartedFunctions(snapshots, awaitedFunctions, byShape)) awaitedFunctions.delete(id);

    const routes: HttpRoute[] = [];
    for (const { trigger, ownerId } of byShape.values()) {
      const route: HttpRoute = {
        method: trigger.http.httpMethod,
        pattern: trigger.http.pattern,
        triggerId: trigger.id,
        functionId: trigger.functionId,
        ownerId,
      };
      if (trigger.http.conditionFunctionId !== undefined) route.conditionFunctionId = trigger.http.conditionFunctionId;
      if (trigger.http.middlewareFunctionIds !== undefined) {
        route.middlewareFunctionIds = trigger.http.middlewareFunctionIds;
      }
      routes.push(route);
    }
    this.buildCount++;
    return {
      version: this.buildCount,
      router: new Router(routes, this.ignoreTrailingSlash),
      routes,
      middleware: new MiddlewareIndex(middleware, this.ignoreTrailingSlash),
      functionOwners,
      awaitedFunctions,
    };
  }
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
        if (winner !== undefined && winner.live && winner.trigger !== trigger) superseded.add(trigger.functionId);
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
