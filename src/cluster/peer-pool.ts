import type { Logger } from 'pino';
import { ownerTag } from '../channels/channel-registry.js';
import type { ForwardResult, ForwardTarget } from '../forwarding/forward-client.js';
import type { ForwardTls } from '../forwarding/forward-tls.js';
import type { TunnelOpenResult } from '../forwarding/tunnel-client.js';
import { openTunnel, tunnelLinkResult } from '../forwarding/tunnel-client.js';
import { ForwardClient } from '../forwarding/forward-client.js';
import type { InvokeOptions } from '../invocation/invoker.js';
import type { ChannelLinkResult } from '../observability/metrics.js';
import type { RouteTable } from '../routing/route-table.js';
import type { PeerEndpoint } from '../routing/registrations.js';

export interface PeerPoolOptions {
  selfNodeId: string;
  selfPeerId: string;
  secret: string;
  cluster: string;
  logger: Logger;
  /** Mutual TLS for TCP links to other nodes (forward-tls.ts). */
  tls?: ForwardTls;
  /** Counts each channel link this process opens, by outcome. */
  metrics?: { channelLink(result: ChannelLinkResult): void };
}

/** Connect plus handshake of a channel link to a peer. */
const CHANNEL_LINK_TIMEOUT_MS = 2000;

/**
 * One forward client per peer, created on first use from the peer's advertised endpoint: the Unix
 * socket for peers of this node, TCP for other nodes. A peer that leaves the table has its client
 * closed, which settles whatever was still pending on it.
 */

export class PeerPool {
  private readonly clients = new Map<string, ForwardClient>();
  /** Peer id → its channel owner tag (a hash, so computed once per peer). */
  private readonly tags = new Map<string, string>();

  constructor(
    private readonly table: RouteTable,
    private readonly options: PeerPoolOptions,
  ) {}

  invoke(peerId: string, functionId: string, data: unknown, options: InvokeOptions): Promise<ForwardResult> {
    const client = this.client(peerId);
    if (client === undefined) return Promise.resolve({ dispatched: false, reason: `peer ${peerId} has no reachable endpoint` });
    return client.invoke(functionId, data, options);
  }

  fire(peerId: string, functionId: string, data: unknown, metadata?: unknown): boolean {
    const client = this.client(peerId);
    if (client === undefined) return false;
    client.fire(functionId, data, metadata);
    return true;
  }

  /**
   * Opens a link of its own to the peer whose channels carry `tag` (docs/streaming.md#across-the-cluster),
   * for one end of a channel it holds. `not_found` when no peer in the table has that tag.
   */
  async openChannel(tag: string, channel: { channelId: string; key: string; direction: 'read' | 'write' }): Promise<TunnelOpenResult> {
    const opened = await this.openTunnelTo(tag, channel);
    this.options.metrics?.channelLink(tunnelLinkResult(opened));
    return opened;
  }

  private openTunnelTo(tag: string, channel: { channelId: string; key: string; direction: 'read' | 'write' }): Promise<TunnelOpenResult> {
    for (const snapshot of this.table.snapshotsHeld()) {
      const peerId = snapshot.ownerId;
      if (peerId === this.options.selfPeerId || this.tagOf(peerId) !== tag) continue;
      const endpoint = this.table.endpointOf(peerId);
      const target = endpoint === undefined ? undefined : this.targetFor(endpoint);
      if (target === undefined) return Promise.resolve({ ok: false, reason: `peer ${peerId} has no reachable endpoint` });
      const settings = { secret: this.options.secret, cluster: this.options.cluster, selfPeerId: this.options.selfPeerId, timeoutMs: CHANNEL_LINK_TIMEOUT_MS };
      return openTunnel(target, settings, channel);
    }
    return Promise.resolve({ ok: false, reason: 'not_found' });
  }

  private tagOf(peerId: string): string {
    let tag = this.tags.get(peerId);
    if (tag === undefined) {
      tag = ownerTag(peerId);
      this.tags.set(peerId, tag);
    }
    return tag;
  }

  /** Closes the client of a peer that left. */
  drop(peerId: string): void {
    this.tags.delete(peerId);
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
    if (endpoint.host !== undefined && endpoint.port !== undefined) {
      return { host: endpoint.host, port: endpoint.port, ...(this.options.tls === undefined ? {} : { tls: this.options.tls }) };
    }
    return undefined;
  }
}
