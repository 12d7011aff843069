import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { Bus } from '../bus/bus.js';
import { SnapshotChecker } from '../bus/snapshot-check.js';
import { toWireSnapshot } from '../bus/wire-snapshot.js';
import { RETIRE_WORKER_FUNCTION } from '../forwarding/forward-messages.js';
import type { EngineMetrics } from '../observability/metrics.js';
import type { PeerEndpoint } from '../routing/registrations.js';
import type { RouteTable, SnapshotSource } from '../routing/route-table.js';
import type { PeerIdentity } from './peer-id.js';
import { incarnationOf } from './peer-id.js';
import type { PeerPool } from './peer-pool.js';

/** Registrations are published at most this often: a reconnect storm becomes a few snapshots. */
const PUBLISH_COALESCE_MS = 5;
/**
 * A large snapshot also waits this many times what publishing the last one cost here (bounded by
 * PUBLISH_MAX_DELAY_MS): every peer parses and applies each full snapshot, so a burst of 10,000
 * registrations published every 5 ms made the sibling's work grow with the square of the table.
 * The cost is the CPU time the publish took, not its wall time: on a busy host a publish preempted for
 * 20 ms made the next one wait the full 200 ms although it had cost well under a millisecond
 * (docs/scale.md: a registration's time to the channel, N = 32 on 2 cores).
 */
const PUBLISH_COST_FACTOR = 10;
/**
 * The factor when the bus carries each change as a delta (Bus.recordsShared: the Redis bus): peers then
 * pay for what changed, not for the whole snapshot, and what is left to bound is this process's own
 * share of a core spent publishing in a burst (at most a third). With the factor of 10, a worker's
 * trigger registered just after its function waited ten times the function's publication: 30–90 ms of
 * a registration's time to the channel on a loaded host (docs/scale.md, runs 9 and 10).
 */
const PUBLISH_COST_FACTOR_DELTAS = 2;
const PUBLISH_MAX_DELAY_MS = 200;
/**
 * The cost of the last publish only slows publishes that follow it within this long (a burst): the
 * first change after a quiet spell goes out at once, whatever a large join or burst cost before it.
 */
const PUBLISH_BURST_MS = 1000;

export interface MembershipOptions {
  identity: PeerIdentity;
  bus: Bus;
  table: RouteTable;
  /** This process's own registrations (the worker hub). */
  local: SnapshotSource;
  peers: PeerPool;
  ignoreTrailingSlash: boolean;
  metrics: EngineMetrics;
  logger: Logger;
}

/**
 * This process as a member of the cluster (docs/cluster.md): it joins the bus, applies the peers'
 * snapshots to the table (checked first), drops peers that leave or restart, and publishes its own
 * registrations, coalesced. The engine tells it when the local registrations change.
 */
export class ClusterMembership {
  private endpointValue: PeerEndpoint | undefined;
  private publishTimer: NodeJS.Timeout | undefined;
  /** What the last publish cost this process (snapshot and send), in ms of CPU, and when it ended. */
  private lastPublishCostMs = 0;
  private lastPublishAt = Number.NEGATIVE_INFINITY;
  private closed = false;
  /** The version of the local snapshot last published. */
  private publishedVersion: number | undefined;
  /** Checks each peer's snapshot against the one it checked of that peer before: a change costs what changed. */
  private readonly checker: SnapshotChecker;

  constructor(private readonly options: MembershipOptions) {
    this.checker = new SnapshotChecker(options.ignoreTrailingSlash, options.bus.recordsShared === true);
  }

  /** Where peers reach this process's forward listener, once joined. */
  get endpoint(): PeerEndpoint | undefined {
    return this.endpointValue;
  }

  get synced(): boolean {
    return this.options.bus.synced;
  }

  /** Joins the bus (resolves once the view of every peer is loaded), then publishes this peer. */
  async join(endpoint: PeerEndpoint): Promise<void> {
    this.endpointValue = endpoint;
    const { bus, table, metrics } = this.options;
    const logger = this.options.logger;
    const checker = this.checker;
    await bus.start({
      snapshot: (received) => {
        const checked = checker.check(received);
        if (!checked.ok) {
          logger.warn({ ownerId: received.ownerId, code: 'BUS_MALFORMED', reason: checked.reason }, 'peer snapshot refused');
          return;
        }
        const snapshot = checked.snapshot;
        if (table.endpointOf(snapshot.ownerId) === undefined) {
          if (this.supersedeIncarnations(snapshot.ownerId) === 'stale') {
            checker.forget(snapshot.ownerId);
            logger.debug({ peerId: snapshot.ownerId }, 'snapshot of an earlier incarnation of a restarted child ignored');
            return;
          }
          logger.info({ peerId: snapshot.ownerId, endpoint: snapshot.endpoint }, 'peer joined');
        }
        table.applySnapshot(snapshot);
        if (snapshot.publishedAt !== undefined) metrics.tableSyncLag((Date.now() - snapshot.publishedAt) / 1000);
      },
      peerGone: (peerId) => {
        checker.forget(peerId);
        if (table.removeOwner(peerId)) logger.info({ peerId }, 'peer left');
        this.options.peers.drop(peerId);
      },
    });
    this.publishNow();
  }

  /** The local registrations changed: publish them soon (coalesced). */
  localChanged(): void {
    if (this.endpointValue === undefined || this.publishTimer !== undefined || this.closed) return;
    const inBurst = performance.now() - this.lastPublishAt < PUBLISH_BURST_MS;
    const factor = this.options.bus.recordsShared === true ? PUBLISH_COST_FACTOR_DELTAS : PUBLISH_COST_FACTOR;
    const delayMs = inBurst ? Math.min(PUBLISH_MAX_DELAY_MS, Math.max(PUBLISH_COALESCE_MS, this.lastPublishCostMs * factor)) : PUBLISH_COALESCE_MS;
    this.publishTimer = setTimeout(() => {
      this.publishTimer = undefined;
      this.publishNow();
    }, delayMs);
  }

  /**
   * A worker reattached here; its previous connection is on another peer (or gone). Every peer whose
   * snapshot lists that worker is asked to retire it; the token is checked there.
   */
  retireElsewhere(workerId: string, token: string): number {
    let asked = 0;
    for (const snapshot of this.options.table.snapshotsHeld()) {
      if (snapshot.ownerId === this.options.local.ownerId) continue;
      if (snapshot.workers?.some((worker) => worker.id === workerId) !== true) continue;
      if (this.options.peers.fire(snapshot.ownerId, RETIRE_WORKER_FUNCTION, { worker_id: workerId, reattach_token: token })) asked++;
    }
    return asked;
  }

  /**
   * Publishes pending local registrations now instead of at the end of the coalescing delay (a
   * sibling's freshness barrier, src/cluster/freshness.ts); returns the version last published, or
   * undefined before joining.
   */
  flush(): number | undefined {
    if (this.publishTimer !== undefined) {
      clearTimeout(this.publishTimer);
      this.publishTimer = undefined;
      this.publishNow();
    }
    return this.publishedVersion;
  }

  /** Leaves the bus (peers stop sending here). Idempotent. */
  async leave(): Promise<void> {
    this.closed = true;
    clearTimeout(this.publishTimer);
    this.publishTimer = undefined;
    await this.options.bus.close();
  }

  /**
   * A peer id is node/index/epoch, and a node runs one child per index at a time: a later epoch means
   * the child restarted and the earlier incarnation is dead. Dropping it now, not when its lease runs
   * out, converges faster after a child crash (Redis mode; embedded drops it at once anyway). Returns
   * 'stale' when the joining peer is itself the earlier incarnation (a dead child's key reloaded).
   */
  private supersedeIncarnations(peerId: string): 'live' | 'stale' {
    const joining = incarnationOf(peerId);
    if (joining === undefined) return 'live';
    const { table, local } = this.options;
    // An earlier incarnation of this very child (its key outlived it in Redis).
    if (incarnationOf(local.ownerId)?.slot === joining.slot) return 'stale';
    for (const held of [...table.ownerVersions().keys()]) {
      const other = incarnationOf(held);
      if (held === peerId || other?.slot !== joining.slot) continue;
      if (other.startedMs > joining.startedMs) return 'stale';
      this.checker.forget(held);
      if (table.removeOwner(held)) this.options.logger.info({ peerId: held, replacedBy: peerId }, 'peer replaced by a restarted incarnation');
      this.options.peers.drop(held);
    }
    return 'live';
  }

  private publishNow(): void {
    const endpoint = this.endpointValue;
    if (endpoint === undefined || this.closed) return;
    const started = process.cpuUsage();
    const snapshot = this.options.local.snapshot();
    this.options.bus.publish(toWireSnapshot({ ...snapshot, endpoint, publishedAt: Date.now() }));
    this.publishedVersion = snapshot.version;
    this.lastPublishAt = performance.now();
    const cost = process.cpuUsage(started);
    this.lastPublishCostMs = (cost.user + cost.system) / 1000;
  }
}
