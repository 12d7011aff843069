import { connect } from 'node:net';
import type { Socket } from 'node:net';
import type { ForwardTarget } from './forward-connection.js';
import { dialForwardTcp } from './forward-tls.js';
import { FRAME_HEADER_BYTES } from './forward-frames.js';
import type { ChannelAttachMessage } from './forward-messages.js';
import type { ChannelLinkResult } from '../observability/metrics.js';
import { FORWARD_PROTOCOL_VERSION, HELLO_MAX_FRAME_BYTES, decodeServerMessage, encodeChannelAttach } from './forward-messages.js';

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
 * holds (forward-messages.ts, `channelAttach`). Bounded by `timeoutMs` from connect to answer.
 * Bytes the peer sent right after its answer are put back on the socket for whoever reads it next.
 */
export function openTunnel(
  target: ForwardTarget,
  settings: TunnelSettings,
  channel: Pick<ChannelAttachMessage, 'channelId' | 'key' | 'direction'>,
): Promise<TunnelOpenResult> {
  return new Promise<TunnelOpenResult>((resolve) => {
    const attach = (): void => {
      socket.write(
        encodeChannelAttach({
          version: FORWARD_PROTOCOL_VERSION,
          cluster: settings.cluster,
          secret: settings.secret,
          peerId: settings.selfPeerId,
          channelId: channel.channelId,
          key: channel.key,
          direction: channel.direction,
        }),
      );
    };
    let socket: Socket;
    if (target.socketPath !== undefined) {
      socket = connect({ path: target.socketPath });
      socket.once('connect', attach);
    } else {
      socket = dialForwardTcp({ host: target.host as string, port: target.port as number, ...(target.tls === undefined ? {} : { tls: target.tls }) }, {}, attach);
    }
    let received = Buffer.alloc(0);
    let settled = false;
    const finish = (result: TunnelOpenResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('close', onClose);
      if (!result.ok) socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => finish({ ok: false, reason: `no answer within ${settings.timeoutMs} ms` }), settings.timeoutMs);
    const onError = (err: Error): void => finish({ ok: false, reason: err.message });
    const onClose = (): void => finish({ ok: false, reason: 'connection closed before an answer' });
    const onData = (chunk: Buffer): void => {
      received = Buffer.concat([received, chunk]);
      if (received.length < FRAME_HEADER_BYTES) return;
      const length = received.readUInt32BE(0);
      if (length === 0 || length > HELLO_MAX_FRAME_BYTES) {
        finish({ ok: false, reason: 'malformed answer' });
        return;
      }
      if (received.length < FRAME_HEADER_BYTES + length) return;
      let answer;
      try {
        answer = decodeServerMessage(received.subarray(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + length));
      } catch {
        finish({ ok: false, reason: 'malformed answer' });
        return;
      }
      if (answer.kind === 'reject') {
        finish({ ok: false, reason: answer.reason });
        return;
      }
      if (answer.kind !== 'helloOk') {
        finish({ ok: false, reason: `unexpected ${answer.kind}` });
        return;
      }
      socket.pause();
      const rest = received.subarray(FRAME_HEADER_BYTES + length);
      if (rest.length > 0) socket.unshift(rest);
      finish({ ok: true, socket });
    };
    socket.on('data', onData);
    socket.on('error', onError);
    socket.on('close', onClose);

  });
}
