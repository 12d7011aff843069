import type { Logger } from 'pino';
import type { ForwardResult } from '../forwarding/forward-client.js';
import type { InvocationOutcome, InvokeOptions, Invoker } from '../invocation/invoker.js';
import { engineFailure } from '../invocation/invoker.js';
import { RoundRobin } from '../invocation/round-robin.js';
import type { EngineMetrics } from '../observability/metrics.js';
import type { RouteTable } from '../routing/route-table.js';
import type { PeerPool } from './peer-pool.js';

/** What the invoker needs of the peer pool: a forward and a fire (tests pass their own). */
export type PeerCalls = Pick<PeerPool, 'invoke' | 'fire'>;

/**
 * The invoker of a cluster child: a worker on this process is called directly; otherwise the call is
 * forwarded to a peer that owns the function. Remote owners are balanced round-robin, a turn per
 * function (invocation/round-robin.ts). A forward that never reached a worker (peer unreachable,
 * worker just left it) is tried on the next owner; once a call was dispatched it is never retried,
 * because the worker may have run it.
 */
export class ClusterInvoker implements Invoker {
  private readonly replicas = new RoundRobin();

  constructor(
    private readonly local: Invoker,
    private readonly table: RouteTable,
    private readonly peers: PeerCalls,
    private readonly selfPeerId: string,
    private readonly logger: Logger,
    private readonly metrics?: EngineMetrics,
  ) {}

  invoke(functionId: string, data: unknown, options: InvokeOptions): Promise<InvocationOutcome> {
    if (this.local.has(functionId)) return this.local.invoke(functionId, data, options);
    const owners = this.remoteOwners(functionId);
    if (owners.length === 0) {
      this.replicas.forget(functionId);
      return Promise.resolve(engineFailure('FUNCTION_UNAVAILABLE', `no connected worker serves ${functionId}`));
    }
    return this.forward(functionId, data, options, owners);
  }

  fire(functionId: string, data: unknown, metadata?: unknown): boolean {
    if (this.local.has(functionId)) return this.local.fire(functionId, data, metadata);
    const owners = this.remoteOwners(functionId);
    const owner = this.replicas.pick(functionId, owners);
    if (owner === undefined) return false;
    return this.peers.fire(owner, functionId, data, metadata);
  }

  has(functionId: string): boolean {
    return this.local.has(functionId) || this.remoteOwners(functionId).length > 0;
  }

  private remoteOwners(functionId: string): readonly string[] {
    const owners = this.table.current().functionOwners.get(functionId);
    if (owners === undefined) return [];
    return owners.includes(this.selfPeerId) ? owners.filter((owner) => owner !== this.selfPeerId) : owners;
  }

  private async forward(
    functionId: string,
    data: unknown,
    options: InvokeOptions,
    owners: readonly string[],
  ): Promise<InvocationOutcome> {
    const start = this.replicas.start(functionId, owners.length);
    let lastReason = 'no owner reachable';
    for (let i = 0; i < owners.length; i++) {
      const owner = owners[(start + i) % owners.length] as string;
      const result: ForwardResult = await this.peers.invoke(owner, functionId, data, options);
      if (result.dispatched) {
        if (options.trace !== undefined) {
          options.trace.forwarded = true;
          options.trace.peerId = owner;
        }
        const outcome = result.outcome;
        if (!outcome.ok && outcome.failure.source === 'engine') {
          if (outcome.failure.code === 'WORKER_DISCONNECTED') this.metrics?.forwardError('disconnected');
          else if (outcome.failure.code === 'TIMEOUT') this.metrics?.forwardError('timeout');
        }
        return outcome;
      }
      this.metrics?.forwardError('not_dispatched');
      lastReason = result.reason;
      this.logger.debug({ functionId, peerId: owner, reason: result.reason, requestId: options.requestId }, 'forward not dispatched; trying the next owner');
    }
    return engineFailure('FUNCTION_UNAVAILABLE', `no owner of ${functionId} could take the call (${lastReason})`);
  }
}
