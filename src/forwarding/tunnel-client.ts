import type { Socket } from 'node:net';
import type { ChannelLinkResult } from '../observability/metrics.js';
import type { ForwardTarget } from './dial-peer.js';
import { dialPeer } from './dial-peer.js';
import type { ChannelAttachMessage } from './forward-messages.js';
import { FORWARD_PROTOCOL_VERSION, encodeChannelAttach } from './forward-messages.js';

export type TunnelOpenResult =
  /** The peer holds the channel and gave us that end: the socket now carries it (paused). */
  | { ok: true; socket: Socket }
  /** `not_found` / `in_use` from the peer, or why it could not be asked. */
  | { ok: false; reason: string };

/** How an open counts in the channel-link metric: the peer said no (`refused`) or it could not be asked. */
export function tunnelLinkResult(opened: TunnelOpenResult): ChannelLinkResult {
  if (opened.ok) return 'opened';
  return opened.reason === 'not_found' || opened.reason === 'in_use' ? 'refused' : 'failed';
}

export interface TunnelSettings {
  secret: string;
  cluster: string;
  selfPeerId: string;
  timeoutMs: number;
}

/**
 * Opens a connection of its own to a peer's forward listener for one end of a channel the peer
 * holds (forward-messages.ts, `channelAttach`), through the same dial and handshake as the call
 * connection (dial-peer.ts). Bounded by `timeoutMs` from connect to answer. Bytes the peer sent
 * right after its answer are put back on the socket for whoever reads it next.
 */
export function openTunnel(
  target: ForwardTarget,
  settings: TunnelSettings,
  channel: Pick<ChannelAttachMessage, 'channelId' | 'key' | 'direction'>,
): Promise<TunnelOpenResult> {
  const attach = (): Buffer =>
    encodeChannelAttach({
      version: FORWARD_PROTOCOL_VERSION,
      cluster: settings.cluster,
      secret: settings.secret,
      peerId: settings.selfPeerId,
      channelId: channel.channelId,
      key: channel.key,
      direction: channel.direction,
    });
  return new Promise<TunnelOpenResult>((resolve) => {
    dialPeer(target, { hello: attach, timeoutMs: settings.timeoutMs }, {
      ready: (socket) => resolve({ ok: true, socket }),
      // A refusal's reason is the peer's own word (`not_found`, `in_use`): callers branch on it.
      failed: (failure) => resolve({ ok: false, reason: failure.reason }),
    });
  });
}
