import type { OwnerSnapshot } from './registrations.js';
import type { RoutingState } from './route-table.js';

/** The cluster's routes and middleware, with the peers that serve each function (admin GET /routes). */
export function routesView(state: RoutingState): Record<string, unknown> {
  const ownersOf = (functionId: string): readonly string[] => state.functionOwners.get(functionId) ?? [];
  return {
    tableVersion: state.version,
    routes: state.routes.map((route) => ({
      method: route.method,
      path: route.pattern.source,
      function_id: route.functionId,
      owners: ownersOf(route.functionId),
      // Who holds the route (docs/security.md#route-ownership): a conflicting registration is refused.
      owner: { principal: route.principal, peer: route.ownerId, worker_id: route.workerId, trigger_id: route.triggerId },
      ...(route.conditionFunctionId === undefined ? {} : { condition_function_id: route.conditionFunctionId }),
      ...(route.middlewareFunctionIds === undefined ? {} : { middleware_function_ids: route.middlewareFunctionIds }),
    })),
    middleware: state.middleware.ordered.map((m) => ({
      function_id: m.functionId,
      phase: m.phase,
      priority: m.priority,
      ...(m.scopePath === undefined ? {} : { scope: m.scopePath }),
      ...(m.restrictedTo === undefined ? {} : { restricted_to: m.restrictedTo }),
      owners: ownersOf(m.functionId),
    })),
  };
}

/**
 * Every connected worker in the cluster with its functions (admin GET /workers). This process's own
 * snapshot carries no endpoint (one is added when it is published): `self` names its node.
 */
export function workersView(snapshots: readonly OwnerSnapshot[], self: { ownerId: string; nodeId: string | undefined }): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const snapshot of snapshots) {
    const node = snapshot.endpoint?.nodeId ?? (snapshot.ownerId === self.ownerId ? self.nodeId : undefined);
    for (const worker of snapshot.workers ?? []) {
      out.push({
        ...worker,
        peer: snapshot.ownerId,
        ...(node === undefined ? {} : { node }),
        functions: snapshot.functions.filter((fn) => fn.workerId === worker.id).map((fn) => fn.id),
      });
    }
  }
  return out;
}
