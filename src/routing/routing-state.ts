// What the route table (route-table.ts) gives its readers: the routing state of a build and its parts.
import type { MiddlewareIndex } from './middleware-index.js';
import type { PathPattern } from './path-pattern.js';
import type { OwnerSnapshot } from './registrations.js';
import type { Router } from './router.js';

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

/**
 * The table as a request or a listener sees it. `version`, `conflicts` and `changedOwners` are those
 * of the build that made it; the router, the function maps and `routes` are the table's own, which
 * each later change updates in place (a change costs what it touched, not the table's size: docs/scale.md).
 * A request reads the state again after anything it waits for (src/http/pipeline.ts).
 */
export interface RoutingState {
  version: number;
  router: Router<HttpRoute>;
  /** The routes the router serves (admin view), listed when first read. */
  readonly routes: readonly HttpRoute[];
  /** Middleware selection by phase and path: a new index only when the middleware changed. */
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
  /** Route patterns (`pattern.source`) this build removed from the table and no other route still has (request metrics). */
  routesLeft: readonly string[];
  /** What this build did: it follows the change, not the table's size (docs/scale.md). */
  work: TableWork;
}

/** The work of one build (RoutingState.work): owners re-indexed, route keys and functions decided again, awaited checks, router updates. */
export interface TableWork {
  owners: number;
  routeKeys: number;
  functions: number;
  awaited: number;
  routerUpdates: number;
  /** The middleware list was derived again (a new index only if it differs). */
  middleware: boolean;
}

/** The local process's registrations, pulled only when the table rebuilds. */
export interface SnapshotSource {
  readonly ownerId: string;
  snapshot(): OwnerSnapshot;
}
