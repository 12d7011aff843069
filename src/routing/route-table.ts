import type { MiddlewareConfig } from '../config/types.js';
import { ChurnMap } from './churn-map.js';
import { addMember, removeMember, setOrDelete } from './map-members.js';
import type { MiddlewareFrom } from './middleware-bindings.js';
import { configBindings, middlewareBindings, sameMiddleware } from './middleware-bindings.js';
import { MiddlewareIndex } from './middleware-index.js';
import type { Touched } from './owner-index.js';
import { OwnerIndex, nothingTouched, routeKey } from './owner-index.js';
import type { MiddlewareBinding, OwnerSnapshot, PeerEndpoint, TriggerRecord } from './registrations.js';
import type { Candidate } from './route-ownership.js';
import { candidatesOf, functionHolding, routeHolder, routeOf } from './route-ownership.js';
import { Router } from './router.js';
import type { HttpRoute, RegistrationConflict, RoutingState, SnapshotSource, TableWork } from './routing-state.js';

export type { HttpRoute, RegistrationConflict, RoutingState, SnapshotSource, TableWork } from './routing-state.js';

type Listener = (state: RoutingState) => void;

/** The local process sorts after every remote owner (as its snapshot always came last). */
const LOCAL_RANK = Number.POSITIVE_INFINITY;

const byRank = (a: OwnerIndex, b: OwnerIndex): number => a.rank - b.rank;

/** The owners of a key or function in table order (the order the snapshots are merged in). */
function ranked(owners: ReadonlySet<OwnerIndex> | undefined): OwnerIndex[] {
  if (owners === undefined) return [];
  return [...owners].sort(byRank);
}

/**
 * The replicated table: one snapshot per owner, and what is derived from all of them: the router,
 * function owners, awaited functions, middleware and conflicts. Changes only mark the table dirty; the
 * next read applies them once, so a burst of registrations costs one pass. A pass re-indexes only the
 * owners that changed (owner-index.ts), then recomputes only the route keys and function ids they
 * touched — each decision made exactly as a whole-table merge would make it — and updates the router
 * one route at a time. Work per change follows the change (and a pass over the changed owner's
 * records), not the size of the table.
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

  // The merge, kept between builds.
  /** Each remote owner's place: the order of the first snapshot since it was last removed. */
  private readonly ranks = new Map<string, number>();
  private nextRank = 0;
  /** Remote owners' indexes, in rank order. */
  private readonly indexes = new Map<string, OwnerIndex>();
  private localIndex: OwnerIndex | undefined;
  /** Owners holding bindings of each route key; holding records or departed claims of each function id. */
  private readonly keyOwners = new ChurnMap<string, Set<OwnerIndex>>();
  private readonly functionHolders = new ChurnMap<string, Set<OwnerIndex>>();
  /** Owners with departed workers' triggers of each function id. */
  private readonly departedTriggerOwners = new ChurnMap<string, Set<OwnerIndex>>();
  private readonly winners = new ChurnMap<string, Candidate>();
  private readonly routesByKey = new ChurnMap<string, HttpRoute>();
  /** Route keys whose winning binding is of each function id (liveness reaches awaited functions). */
  private readonly winnerKeys = new ChurnMap<string, Set<string>>();
  /** Routes per pattern source (metrics keep the series of patterns still routed). */
  private readonly sources = new ChurnMap<string, number>();
  private readonly functionOwners = new ChurnMap<string, readonly string[]>();
  private readonly functionMetadata = new ChurnMap<string, Record<string, unknown>>();
  private readonly awaitedFunctions = new Set<string>();
  private readonly functionConflicts = new Map<string, RegistrationConflict[]>();
  private readonly routeConflicts = new Map<string, RegistrationConflict[]>();
  private readonly router: Router<HttpRoute>;
  private middleware: MiddlewareIndex;
  /** The (trigger, owner) list the middleware index was built from. */
  private middlewareFrom: readonly MiddlewareFrom[] = [];

  /**
   * `configMiddleware` (RestApiModule `middleware`) applies to every route; it sorts before
   * trigger-registered middleware of equal priority, in configuration order.
   */
  constructor(
    private readonly ignoreTrailingSlash: boolean,
    configMiddleware: readonly MiddlewareConfig[] = [],
  ) {
    this.configMiddleware = configBindings(configMiddleware);
    this.router = new Router<HttpRoute>([], ignoreTrailingSlash);
    this.middleware = new MiddlewareIndex(this.configMiddleware, ignoreTrailingSlash);
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
    if (held === undefined) this.ranks.set(snapshot.ownerId, this.nextRank++);
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
    const all = [...this.remote.values()];
    if (this.local !== undefined) all.push(this.local.snapshot());
    return all;
  }

  /** Owners whose snapshot is held, with their versions (readiness and the admin view). */
  ownerVersions(): Map<string, number> {
    return new Map([...this.remote].map(([ownerId, snapshot]) => [ownerId, snapshot.version]));
  }

  removeOwner(ownerId: string): boolean {
    const removed = this.remote.delete(ownerId);
    if (removed) {
      this.ranks.delete(ownerId);
      this.changedOwners.add(ownerId);
      this.markChanged();
    }
    return removed;
  }

  /** Whether some route of the table has this pattern (`pattern.source`): request metrics keep its series. */
  routesPattern(source: string): boolean {
    return this.sources.has(source);
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

  /**
   * What the merge holds: owners indexed, route keys and function ids some owner holds, and those with
   * refused registrations. Nothing of a key or function no owner holds stays (tests and debugging).
   */
  sizes(): { owners: number; routeKeys: number; functions: number; conflicted: number } {
    return {
      owners: this.indexes.size + (this.localIndex === undefined ? 0 : 1),
      routeKeys: this.keyOwners.size,
      functions: this.functionHolders.size,
      conflicted: this.functionConflicts.size + this.routeConflicts.size,
    };
  }

  private build(): RoutingState {
    const touched = nothingTouched();
    const work: TableWork = { owners: 0, routeKeys: 0, functions: 0, awaited: 0, routerUpdates: 0, middleware: false };
    const unrouted = new Set<string>();
    const changedOwners = this.changedOwners;
    this.changedOwners = new Set();
    for (const ownerId of changedOwners) this.reindexRemote(ownerId, touched, work);
    if (this.local !== undefined) {
      const ownerId = this.local.ownerId;
      if (this.localIndex?.ownerId !== ownerId) {
        if (this.localIndex !== undefined) this.reindex(this.localIndex, undefined, touched, work);
        this.localIndex = new OwnerIndex(ownerId, LOCAL_RANK);
      }
      this.reindex(this.localIndex, this.local.snapshot(), touched, work);
    }

    // Functions first: a route key's awaited functions read their liveness.
    const awaitedDirty = new Set(touched.departedFunctions);
    const livenessChanged = new Set<string>();
    for (const id of touched.functions) {
      const wasLive = this.functionOwners.has(id);
      this.recomputeFunction(id);
      work.functions++;
      awaitedDirty.add(id);
      if (this.functionOwners.has(id) !== wasLive) livenessChanged.add(id);
    }
    for (const key of touched.keys) this.recomputeKey(key, awaitedDirty, unrouted, work);
    // A function that became live (or not) changes whether departed bindings its routes took over are still awaited.
    for (const id of livenessChanged) {
      for (const key of this.winnerKeys.get(id) ?? []) this.departedFunctionsOf(key, awaitedDirty);
    }
    let awaitedChanged = false;
    for (const id of awaitedDirty) {
      work.awaited++;
      if (this.recomputeAwaited(id)) awaitedChanged = true;
    }
    if (touched.middleware || awaitedChanged) {
      work.middleware = true;
      this.recomputeMiddleware();
    }

    this.buildCount++;
    const conflicts: RegistrationConflict[] = [];
    for (const list of this.functionConflicts.values()) conflicts.push(...list);
    for (const list of this.routeConflicts.values()) conflicts.push(...list);
    const routesLeft = [...unrouted].filter((source) => !this.sources.has(source));
    const routesByKey = this.routesByKey;
    let routes: readonly HttpRoute[] | undefined;
    return {
      version: this.buildCount,
      router: this.router,
      get routes() {
        routes ??= [...routesByKey.values()];
        return routes;
      },
      middleware: this.middleware,
      functionOwners: this.functionOwners,
      awaitedFunctions: this.awaitedFunctions,
      functionMetadata: this.functionMetadata,
      conflicts,
      changedOwners,
      routesLeft,
      work,
    };
  }

  /** A remote owner changed: its index follows its snapshot (one removed, or removed and back, starts over: it sorts last, as new). */
  private reindexRemote(ownerId: string, touched: Touched, work: TableWork): void {
    let index = this.indexes.get(ownerId);
    const rank = this.ranks.get(ownerId);
    if (index !== undefined && index.rank !== rank) {
      this.reindex(index, undefined, touched, work);
      this.indexes.delete(ownerId);
      index = undefined;
    }
    const snapshot = this.remote.get(ownerId);
    if (snapshot === undefined) return;
    if (index === undefined) {
      // Held snapshots always have a rank (applySnapshot gives it, removeOwner takes both away).
      index = new OwnerIndex(ownerId, rank as number);
      this.indexes.set(ownerId, index);
    }
    this.reindex(index, snapshot, touched, work);
  }

  /** Re-indexes one owner and keeps the key and function memberships in step. */
  private reindex(index: OwnerIndex, snapshot: OwnerSnapshot | undefined, touched: Touched, work: TableWork): void {
    const own = nothingTouched();
    index.update(snapshot, own);
    work.owners++;
    for (const key of own.keys) {
      if (index.hasKey(key)) addMember(this.keyOwners, key, index);
      else removeMember(this.keyOwners, key, index);
      touched.keys.add(key);
    }
    for (const id of own.functions) {
      if (index.hasFunction(id)) addMember(this.functionHolders, id, index);
      else removeMember(this.functionHolders, id, index);
      touched.functions.add(id);
    }
    for (const id of own.departedFunctions) {
      if (index.departedTriggers.has(id)) addMember(this.departedTriggerOwners, id, index);
      else removeMember(this.departedTriggerOwners, id, index);
      touched.departedFunctions.add(id);
    }
    if (own.middleware) touched.middleware = true;
  }

  /** Every owner in table order: remote ones by rank, then the local process. */
  private *owners(): Generator<OwnerIndex> {
    yield* this.indexes.values();
    if (this.localIndex !== undefined) yield this.localIndex;
  }

  /** Who holds a function id now (functionHolding): the owners serving it, its metadata and the registrations refused. */
  private recomputeFunction(id: string): void {
    const { servedBy, metadata, conflicts } = functionHolding(id, ranked(this.functionHolders.get(id)));
    this.functionConflicts.delete(id);
    setOrDelete(this.functionOwners, id, servedBy.length > 0 ? servedBy : undefined);
    setOrDelete(this.functionMetadata, id, metadata);
    if (conflicts.length > 0) this.functionConflicts.set(id, conflicts);
  }

  /** The binding that holds a route key now (routeHolder), and the router and awaited functions in step with it. */
  private recomputeKey(key: string, awaitedDirty: Set<string>, unrouted: Set<string>, work: TableWork): void {
    work.routeKeys++;
    const group = candidatesOf(key, ranked(this.keyOwners.get(key)));
    const conflicts: RegistrationConflict[] = [];
    const winner = group.length === 0 ? undefined : routeHolder(group, conflicts);
    this.routeConflicts.delete(key);
    if (conflicts.length > 0) this.routeConflicts.set(key, conflicts);
    // A binding is one owner's record: the same record is the same binding of the same owner.
    if (this.winners.get(key)?.trigger === winner?.trigger) return;
    const previous = this.routesByKey.get(key);
    if (previous !== undefined) {
      removeMember(this.winnerKeys, previous.functionId, key);
      this.winners.delete(key);
      this.routesByKey.delete(key);
      const left = (this.sources.get(previous.pattern.source) as number) - 1;
      if (left > 0) this.sources.set(previous.pattern.source, left);
      else {
        this.sources.delete(previous.pattern.source);
        unrouted.add(previous.pattern.source);
      }
    }
    work.routerUpdates++;
    if (winner === undefined) {
      this.router.delete((previous as HttpRoute).method, (previous as HttpRoute).pattern);
    } else {
      const route = routeOf(winner);
      addMember(this.winnerKeys, winner.trigger.functionId, key);
      this.winners.set(key, winner);
      this.routesByKey.set(key, route);
      this.router.set(route);
      this.sources.set(route.pattern.source, (this.sources.get(route.pattern.source) ?? 0) + 1);
    }
    // Whether a departed binding of this key is taken over depends on who holds it.
    for (const candidate of group) if (candidate.departed) awaitedDirty.add(candidate.trigger.functionId);
  }

  /** The functions of the departed bindings of a route key (one some binding holds). */
  private departedFunctionsOf(key: string, out: Set<string>): void {
    for (const owner of this.keyOwners.get(key) as Set<OwnerIndex>) for (const trigger of owner.departed.get(key) ?? []) out.add(trigger.functionId);
  }

  /**
   * A function is awaited while nothing serves it but a departed worker claims it — a function held
   * and not served is held by such a claim (a registration holding it would serve it) — unless every
   * trigger of its departed workers was a route binding now held by a live binding: then nothing should
   * wait for it (a call still routed to it fails at once). Returns whether that changed.
   */
  private recomputeAwaited(id: string): boolean {
    const awaited = this.functionHolders.has(id) && !this.functionOwners.has(id) && !this.takenOver(id);
    if (awaited === this.awaitedFunctions.has(id)) return false;
    if (awaited) this.awaitedFunctions.add(id);
    else this.awaitedFunctions.delete(id);
    return true;
  }

  /** Every departed trigger of this function is a route binding that a live binding holds now (and there is one). */
  private takenOver(id: string): boolean {
    let takenOver = false;
    for (const owner of this.departedTriggerOwners.get(id) ?? []) {
      for (const trigger of owner.departedTriggers.get(id) as TriggerRecord[]) {
        const winner = trigger.type === 'http' ? this.winners.get(routeKey(trigger)) : undefined;
        // A live winner is another binding: this trigger's own function is awaited, so not live.
        if (winner === undefined || !this.functionOwners.has(winner.trigger.functionId)) return false;
        takenOver = true;
      }
    }
    return takenOver;
  }

  /**
   * Middleware bindings in table order: the module config's, every owner's connected workers', then
   * departed workers' — those only while their function is awaited: once a worker serves it again,
   * that worker's own registration is the binding (no double run). A new index only when the list changed.
   */
  private recomputeMiddleware(): void {
    const from: MiddlewareFrom[] = [];
    for (const owner of this.owners()) for (const trigger of owner.liveMiddleware) from.push({ trigger, ownerId: owner.ownerId });
    for (const owner of this.owners()) {
      for (const trigger of owner.departedMiddleware) if (this.awaitedFunctions.has(trigger.functionId)) from.push({ trigger, ownerId: owner.ownerId });
    }
    if (sameMiddleware(from, this.middlewareFrom)) return;
    this.middlewareFrom = from;
    this.middleware = new MiddlewareIndex(middlewareBindings(this.configMiddleware, from), this.ignoreTrailingSlash);
  }
}
