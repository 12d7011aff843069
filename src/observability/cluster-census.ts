import type { OwnerSnapshot } from '../routing/registrations.js';
import type { RoutingState } from '../routing/route-table.js';

/**
 * Counts over the whole cluster's table, as any one process holds it (docs/operations.md#metrics):
 * what alerts need, since an engine that serves every route by forwarding has no worker of its own.
 */
export interface RouteWorkers {
  method: string;
  /** The route pattern, as the request metrics label it (`/users/:id`). */
  route: string;
  /** Workers anywhere in the cluster that serve the route's function; 0 while it waits out the grace. */
  workers: number;
}

/** Workers connected to any process of any node. */
export function clusterWorkerCount(snapshots: readonly OwnerSnapshot[]): number {
  let count = 0;
  for (const snapshot of snapshots) count += snapshot.workers?.length ?? 0;
  return count;
}

/** For each route in the table, how many workers serve its function now. */
export function routeWorkerCounts(state: RoutingState, snapshots: readonly OwnerSnapshot[]): RouteWorkers[] {
  const workersOf = new Map<string, Set<string>>();
  for (const snapshot of snapshots) {
    for (const fn of snapshot.functions) {
      let workers = workersOf.get(fn.id);
      if (workers === undefined) {
        workers = new Set();
        workersOf.set(fn.id, workers);
      }
      workers.add(`${snapshot.ownerId}/${fn.workerId}`);
    }
  }
  return state.routes.map((route) => ({ method: route.method, route: route.pattern.source, workers: workersOf.get(route.functionId)?.size ?? 0 }));
}
