// Who holds a function id or a route key (docs/security.md#route-ownership): the decisions the route
// table (route-table.ts) makes again for each function id and route key a change touched, from the
// owners holding it in table order.
import type { HttpTrigger, OwnerIndex } from './owner-index.js';
import { compareRegistrationOf } from './registrations.js';
import { MAIN_PRINCIPAL } from './principal.js';
import type { HttpRoute, RegistrationConflict } from './routing-state.js';

interface Held {
  principal: string;
  at: number;
  ownerId: string;
  workerId: string;
}

/** The oldest claim on a function id among its owners (in table order): undefined when none is left. */
function holderOf(id: string, owners: readonly OwnerIndex[]): Held | undefined {
  let held: Held | undefined;
  const claim = (principal: string, at: number, ownerId: string, workerId: string): void => {
    if (held === undefined || at < held.at || (at === held.at && (ownerId < held.ownerId || (ownerId === held.ownerId && workerId < held.workerId)))) {
      held = { principal, at, ownerId, workerId };
    }
  };
  for (const owner of owners) {
    // Registered no earlier than its worker connected.
    for (const gone of owner.claims.get(id) ?? []) claim(gone.principal ?? MAIN_PRINCIPAL, gone.since ?? 0, owner.ownerId, gone.workerId);
    for (const fn of owner.functions.get(id) ?? []) claim(fn.principal ?? MAIN_PRINCIPAL, fn.registeredAt ?? 0, owner.ownerId, fn.workerId);
  }
  return held;
}

/** How a function id is held (functionHolding). */
export interface FunctionHolding {
  /** The owners serving it for the holder's principal, in table order (none when a departed worker's claim holds it, or nothing does). */
  servedBy: string[];
  /** The first metadata registered for the holder's principal. */
  metadata: Record<string, unknown> | undefined;
  /** Registrations of another principal, refused. */
  conflicts: RegistrationConflict[];
}

/**
 * Which principal holds a function id, which owners serve it for that principal, its metadata and
 * the registrations refused (docs/security.md): the oldest claim holds — a connected worker's
 * registration, or a worker away within the reconnect grace (dated by when it connected, since its
 * registrations came later). Another principal cannot become a replica and take a share of its calls.
 */
export function functionHolding(id: string, owners: readonly OwnerIndex[]): FunctionHolding {
  // Undefined when no owner holds it any more: then there is nothing to go through below.
  const holder = holderOf(id, owners);
  const principal = holder?.principal;
  const holderOwnerId = holder?.ownerId as string;
  const servedBy: string[] = [];
  const conflicts: RegistrationConflict[] = [];
  let metadata: { value: Record<string, unknown> } | undefined;
  for (const owner of owners) {
    for (const fn of owner.functions.get(id) ?? []) {
      if ((fn.principal ?? MAIN_PRINCIPAL) === principal) {
        if (fn.metadata !== undefined) metadata ??= { value: fn.metadata };
        if (!servedBy.includes(owner.ownerId)) servedBy.push(owner.ownerId);
        continue;
      }
      conflicts.push({
        kind: 'function',
        ownerId: owner.ownerId,
        workerId: fn.workerId,
        id,
        holderOwnerId,
        samePrincipal: false,
        reason: `function ${id} is registered by another principal already`,
      });
    }
  }
  return { servedBy, metadata: metadata?.value, conflicts };
}

export interface Candidate {
  trigger: HttpTrigger;
  ownerId: string;
  /** From a worker gone within the reconnect grace. */
  departed: boolean;
}

export function routeOf({ trigger, ownerId }: Candidate): HttpRoute {
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
  if (trigger.http.middlewareFunctionIds !== undefined) route.middlewareFunctionIds = trigger.http.middlewareFunctionIds;
  return route;
}

/** The bindings of a route key from its owners (in table order): every live one, then every departed one. */
export function candidatesOf(key: string, owners: readonly OwnerIndex[]): Candidate[] {
  const group: Candidate[] = [];
  for (const owner of owners) for (const trigger of owner.live.get(key) ?? []) group.push({ trigger, ownerId: owner.ownerId, departed: false });
  for (const owner of owners) for (const trigger of owner.departed.get(key) ?? []) group.push({ trigger, ownerId: owner.ownerId, departed: true });
  return group;
}

const byAge = (a: Candidate, b: Candidate): number => compareRegistrationOf(a.trigger, a.ownerId, b.trigger, b.ownerId);
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
export function routeHolder(group: Candidate[], conflicts: RegistrationConflict[]): Candidate {
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
