import type { Logger } from 'pino';
import type { ForwardResult, ForwardTarget } from '../forwarding/forward-client.js';
import { ForwardClient } from '../forwarding/forward-client.js';
import type { InvokeOptions } from '../invocation/invoker.js';
import type { RouteTable } from '../routing/route-table.js';
import type { PeerEndpoint } from '../routing/registrations.js';

export interface PeerPoolOptions {
  selfNodeId: string;
  selfPeerId: string;
  secret: string;
  cluster: string;
  logger: Logger;
}

/**
 * One forward client per peer, created on first use from the peer's advertised endpoint: the Unix
 * socket for peers of this node, TCP for other nodes. A peer that leaves the table has its client
 * closed, which settles whatever was still pending on it.
 */
export class PeerPool {
  private readonly clients = new Map<string, ForwardClient>();

  constructor(
    private readonly table: RouteTable,
    private readonly options: PeerPoolOptions,
  ) {}

  invoke(peerId: string, functionId: string, data: unknown, options: InvokeOptions): Promise<ForwardResult> {
    const client = this.client(peerId);
    if (client === undefined) return Promise.resolve({ dispatched: false, reason: `peer ${peerId} has no reachable endpoint` });
    return client.invoke(functionId, data, options);
  }

  fire(peerId: string, functionId: string, data: unknown): boolean {
    const client = this.client(peerId);
    if (client === undefined) return false;
    client.fire(functionId, data);
    return true;
  }

  /** Closes the client of a peer that left. */
  drop(peerId: string): void {
    const client = this.clients.get(peerId);
    if (client === undefined) return;
    this.clients.delete(peerId);
    void client.close();
  }

  async close(): Promise<void> {
    const clients = [...this.clients.values()];
    this.clients.clear();
    await Promise.allSettled(clients.map((client) => client.close()));
  }

  private client(peerId: string): ForwardClient | undefined {
    const existing = this.clients.get(peerId);
    if (existing !== undefined) return existing;
    const endpoint = this.table.endpointOf(peerId);
    const target = endpoint === undefined ? undefined : this.targetFor(endpoint);
    if (target === undefined) return undefined;
    const client = new ForwardClient(target, {
      secret: this.options.secret,
      cluster: this.options.cluster,
      selfPeerId: this.options.selfPeerId,
      logger: this.options.logger.child({ peerId }),
    });
    this.clients.set(peerId, client);
    return client;
  }

  private targetFor(endpoint: PeerEndpoint): ForwardTarget | undefined {
    if (endpoint.nodeId === this.options.selfNodeId && endpoint.socketPath !== undefined) {
      return { socketPath: endpoint.socketPath };
    }
    if (endpoint.host !== undefined && endpoint.port !== undefined) return { host: endpoint.host, port: endpoint.port };
    return undefined;
  }
}
