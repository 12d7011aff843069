/**
 * What the admin listener says about a node (docs/operations.md#readiness), from its children's last
 * status reports. Plain functions over data: the primary feeds them, tests call them directly.
 */
export interface ChildHealth {
  /** Started and not closing: it can serve its routes. */
  ready: boolean;
  /** Its view of the cluster is in sync (Redis reachable in distributed mode). */
  busSynced: boolean;
}

export interface NodeHealthInput {
  /** SIGTERM or SIGINT received: draining. */
  draining: boolean;
  /** Every child has been ready at least once (the node announced itself). */
  started: boolean;
  /** One entry per child slot; undefined while that child is (re)starting. */
  children: readonly (ChildHealth | undefined)[];
}

/**
 * Ready = this node can serve its routes: not draining, and at start every child listening with the
 * cluster's table loaded; after that at least one child serving (the kernel and node:cluster hand
 * connections to the live ones while a crashed child restarts). A Redis outage does not count: the
 * children serve the last known table and forward as before (docs/reliability.md).
 */
export function nodeReady(input: NodeHealthInput): boolean {
  if (input.draining || input.children.length === 0) return false;
  if (!input.started) return input.children.every((child) => child?.ready === true);
  return input.children.some((child) => child?.ready === true);
}

export type BusState = 'in_sync' | 'out_of_sync';

/** out_of_sync when any serving child lost its view of the cluster (Redis unreachable). */
export function busState(children: readonly (ChildHealth | undefined)[]): BusState {
  return children.some((child) => child?.ready === true && !child.busSynced) ? 'out_of_sync' : 'in_sync';
}
