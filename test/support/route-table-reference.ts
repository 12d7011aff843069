/**
 * The route table's merge as it was before it became incremental (src/routing/route-table.ts at
 * 6088362): every owner's snapshot merged whole on every build. Kept as the oracle of the table's
 * differential test (test/unit/routing.test.ts): after any sequence of changes, the incremental table
 * must decide exactly what this whole-table merge decides.
 */
import { compareMiddleware } from '../../src/routing/middleware-index.js';
import { MAIN_PRINCIPAL, isRestricted } from '../../src/routing/principal.js';
import type { MiddlewareBinding, OwnerSnapshot, TriggerRecord } from '../../src/routing/registrations.js';
import { compareRegistration } from '../../src/routing/registrations.js';
import type { HttpRoute, RegistrationConflict } from '../../src/routing/route-table.js';

export interface ReferenceState {
  routes: HttpRoute[];
  functionOwners: Map<string, string[]>;
  awaitedFunctions: Set<string>;
  functionMetadata: Map<string, Record<string, unknown>>;
  conflicts: RegistrationConflict[];
  /** In execution order (MiddlewareIndex.ordered). */
  middleware: MiddlewareBinding[];
}

export function referenceBuild(snapshots: readonly OwnerSnapshot[], configMiddleware: readonly MiddlewareBinding[]): ReferenceState {
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
  const middleware: MiddlewareBinding[] = [...configMiddleware];
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
  return { routes, functionOwners, awaitedFunctions, functionMetadata, conflicts, middleware: [...middleware].sort(compareMiddleware) };
}

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
