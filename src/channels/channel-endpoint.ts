import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type WebSocket from 'ws';
import type { ChannelDirection } from './channel.js';
import type { ChannelActivity } from './channel-activity.js';
import { Channel } from './channel.js';
import type { ChannelRegistry } from './channel-registry.js';
import { channelLimits, ownerTagOfChannel } from './channel-registry.js';
import { attachTunnelLink } from './tunnel-link.js';
import { attachWebSocket, CLOSE_GOING_AWAY } from './ws-end.js';

/** The path of the channel endpoint on the worker port, as iii-sdk builds it: `/ws/channels/{id}?key=…&dir=read|write`. */
export const CHANNEL_PATH_PREFIX = '/ws/channels/';

export interface ChannelRequest {
  channelId: string;
  key: string;
  direction: ChannelDirection;
}

/** Parses a channel upgrade's target; a string says what is wrong with it. */
export function parseChannelTarget(url: string): ChannelRequest | string {
  const parsed = new URL(url, 'http://worker-port');
  const channelId = decodeURIComponent(parsed.pathname.slice(CHANNEL_PATH_PREFIX.length));
  const key = parsed.searchParams.get('key');
  const dir = parsed.searchParams.get('dir');
  if (channelId === '' || channelId.includes('/')) return 'missing channel id';
  if (key === null || key === '') return 'missing key';
  if (dir !== 'read' && dir !== 'write') return 'dir must be read or write';
  return { channelId, key, direction: dir };
}

/** Reaches the process that holds a channel (cluster/peer-pool.ts): a connected link, or why not. */
export type RemoteChannelOpener = (tag: string, request: ChannelRequest) => Promise<{ ok: true; socket: Socket } | { ok: false; reason: string }>;

/** Completes the WebSocket upgrade (the worker server's `ws` instance). */
export type UpgradeCompleter = (request: IncomingMessage, socket: Duplex, head: Buffer, done: (ws: WebSocket) => void) => void;

const STATUS_LINE: Record<number, string> = { 400: 'Bad Request', 404: 'Not Found', 409: 'Conflict', 502: 'Bad Gateway' };

function refuse(socket: Duplex, status: number, text: string): void {
  socket.end(`HTTP/1.1 ${status} ${STATUS_LINE[status] ?? ''}\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`);
}

/**
 * The channel endpoint of the worker port (docs/streaming.md#the-channel-socket). A channel held by
 * this process is joined here; one held by another process (its id says which) is reached through a
 * link of its own to that process, with this process relaying between the worker's socket and it.
 * A wrong or missing key is 404 (as iii), an end already taken is 409, a malformed target is 400.
 */
export class ChannelEndpoint {
  constructor(
    private readonly registry: ChannelRegistry,
    private readonly upgrade: UpgradeCompleter,
    private readonly logger: Logger,
    private readonly openRemote?: RemoteChannelOpener,
    /** Records the traffic of the worker sockets joined here (the heartbeat asks it: channel-activity.ts). */
    private readonly activity?: ChannelActivity,
  ) {}

  handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    const target = parseChannelTarget(request.url ?? '');
    if (typeof target === 'string') {
      refuse(socket, 400, target);
      return;
    }
    const tag = ownerTagOfChannel(target.channelId);
    if (tag === this.registry.tag) {
      this.joinLocal(request, socket, head, target);
      return;
    }
    if (tag === undefined || this.openRemote === undefined) {
      refuse(socket, 404, 'Channel not found');
      return;
    }
    this.openRemote(tag, target)
      .then((opened) => {
        if (!opened.ok) {
          const status = opened.reason === 'not_found' ? 404 : opened.reason === 'in_use' ? 409 : 502;
          if (status === 502) this.logger.warn({ channelId: target.channelId, reason: opened.reason }, 'channel held by another process could not be reached');
          refuse(socket, status, status === 404 ? 'Channel not found' : status === 409 ? 'Channel end already in use' : 'Channel holder unreachable');
          return;
        }
        this.relay(request, socket, head, target, opened.socket);
      })
      .catch((err: unknown) => {
        this.logger.error({ err, channelId: target.channelId }, 'channel relay failed');
        socket.destroy();
      });
  }

  private joinLocal(request: IncomingMessage, socket: Duplex, head: Buffer, target: ChannelRequest): void {
    const claim = this.registry.claim(target.channelId, target.key, target.direction);
    if (!claim.ok) {
      refuse(socket, claim.reason === 'not_found' ? 404 : 409, claim.reason === 'not_found' ? 'Channel not found' : 'Channel end already in use');
      return;
    }
    this.upgrade(request, socket, head, (ws) => {
      // Claimed a moment ago; the other end may have torn the channel down meanwhile.
      if (!attachWebSocket(ws, socket, claim.channel, target.direction, this.activity?.track(target.channelId))) ws.close(CLOSE_GOING_AWAY, 'channel gone');
    });
  }

  /**
   * The worker's socket is here, the channel elsewhere: a relay channel (never registered) joins the
   * worker's socket to the link, so both sides keep their back-pressure and close semantics.
   */
  private relay(request: IncomingMessage, socket: Duplex, head: Buffer, target: ChannelRequest, link: Socket): void {
    let upgraded = false;
    // The worker gave up while the link was being opened, or its upgrade failed: drop the link.
    socket.once('close', () => {
      if (!upgraded) link.destroy();
    });
    if (socket.destroyed) {
      link.destroy();
      return;
    }
    this.upgrade(request, socket, head, (ws) => {
      upgraded = true;
      const relay = new Channel(target.channelId, target.key, channelLimits(), () => undefined, undefined, this.registry.budget);
      // The worker reads: the link writes into the relay. The worker writes: the link reads from it.
      attachWebSocket(ws, socket, relay, target.direction, this.activity?.track(target.channelId));
      attachTunnelLink(link, relay, target.direction === 'read' ? 'write' : 'read');
      link.resume();
    });
  }
}
