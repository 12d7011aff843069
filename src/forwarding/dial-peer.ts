import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { FRAME_HEADER_BYTES } from './forward-frames.js';
import type { ForwardTls } from './forward-tls.js';
import { dialForwardTcp } from './forward-tls.js';
import { FORWARD_PROTOCOL_VERSION, HELLO_MAX_FRAME_BYTES, decodeServerMessage } from './forward-messages.js';

/** Where a peer's forward listener is: a Unix socket on this host (preferred when set) or TCP. */
export interface ForwardTarget {
  socketPath?: string;
  host?: string;
  port?: number;
  /** Mutual TLS on the TCP link (forward-tls.ts); never on a Unix socket. */
  tls?: ForwardTls;
}

export interface DialSettings {
  /** The first frame: a hello or a channelAttach, encoded per dial (its nonce must be new). */
  hello: () => Buffer;
  /** Bound on connect plus the peer's answer. */
  timeoutMs: number;
  keepAliveInitialDelayMs?: number;
  /**
   * Bytes after the handshake go here, and on plain TCP or a Unix socket reads land in one reused
   * buffer (no allocation per read). Unset: the socket is handed over paused, for 'data' readers.
   */
  onData?: (chunk: Buffer) => void;
}

/** Why a dial did not end in a link: the peer said no (`refused`, its reason as sent) or it `failed`. */
export type DialFailure = { kind: 'refused'; reason: string } | { kind: 'failed'; reason: string };

export interface DialHandlers {
  /**
   * The peer accepted with this process's protocol version; from here the caller owns the socket.
   * `features`: what the peer's helloOk said it reads (HELLO_FEATURES bits).
   */
  ready(socket: Socket, features: number): void;
  /** Once, instead of ready; the socket is destroyed. */
  failed(failure: DialFailure): void;
}

const READ_BUFFER_BYTES = 64 * 1024;

/**
 * Dials a peer's forward listener, sends the hello and reads the answer (forward-messages.ts): a
 * helloOk of this protocol version makes the link ready; a reject, another version, anything else,
 * an error, a close or the timeout fails it. Bytes the peer sent right behind its answer reach the
 * caller first (onData, or put back on the paused socket). Used by every link to a peer: the
 * multiplexed call connection and each channel tunnel. Returns the socket at once, so that the
 * caller can destroy it while the dial is under way (the dial then fails).
 */
export function dialPeer(target: ForwardTarget, settings: DialSettings, handlers: DialHandlers): Socket {
  let settled = false;
  let received = Buffer.alloc(0);
  let reader: (chunk: Buffer) => void;
  const sayHello = (): void => {
    if (!settled) socket.write(settings.hello());
  };
  // With onData every read goes through `reader`: the handshake first, then the caller.
  const reads = settings.onData === undefined ? undefined : reusedReadBuffer((chunk) => reader(chunk));
  let socket: Socket;
  if (target.socketPath !== undefined) {
    socket = connect({ path: target.socketPath, ...(reads === undefined ? {} : { onread: reads.onread }) });
    socket.once('connect', sayHello);
  } else {
    const tcp = { host: target.host as string, port: target.port as number, ...(target.tls === undefined ? {} : { tls: target.tls }) };
    const keepAlive = settings.keepAliveInitialDelayMs === undefined ? {} : { keepAliveInitialDelay: settings.keepAliveInitialDelayMs };
    socket = dialForwardTcp(tcp, { ...reads, ...keepAlive }, sayHello);
  }
  const fail = (failure: DialFailure): void => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    socket.destroy();
    handlers.failed(failure);
  };
  let error: Error | undefined;
  const onError = (err: Error): void => {
    error = err;
  };
  const onClose = (): void => fail({ kind: 'failed', reason: error === undefined ? 'connection closed before an answer' : error.message });
  const onAnswer = (chunk: Buffer): void => {
    if (settled) return;
    received = received.length === 0 ? Buffer.from(chunk) : Buffer.concat([received, chunk]);
    if (received.length < FRAME_HEADER_BYTES) return;
    const length = received.readUInt32BE(0);
    if (length === 0 || length > HELLO_MAX_FRAME_BYTES) return fail({ kind: 'failed', reason: 'malformed handshake answer' });
    if (received.length < FRAME_HEADER_BYTES + length) return;
    let answer;
    try {
      answer = decodeServerMessage(received.subarray(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + length));
    } catch {
      return fail({ kind: 'failed', reason: 'malformed handshake answer' });
    }
    if (answer.kind === 'reject') return fail({ kind: 'refused', reason: answer.reason });
    if (answer.kind !== 'helloOk') return fail({ kind: 'failed', reason: `unexpected ${answer.kind} during the handshake` });
    if (answer.version !== FORWARD_PROTOCOL_VERSION) {
      return fail({ kind: 'failed', reason: `peer speaks forward protocol version ${answer.version}, this process ${FORWARD_PROTOCOL_VERSION}` });
    }
    settled = true;
    clearTimeout(timer);
    socket.off('error', onError);
    socket.off('close', onClose);
    const rest = received.subarray(FRAME_HEADER_BYTES + length);
    received = Buffer.alloc(0);
    if (settings.onData === undefined) {
      socket.off('data', onAnswer);
      socket.pause();
      if (rest.length > 0) socket.unshift(rest);
      handlers.ready(socket, answer.features);
      return;
    }
    const onData = settings.onData;
    reader = onData;
    handlers.ready(socket, answer.features);
    if (rest.length > 0) onData(rest);
  };
  reader = onAnswer;
  if (reads === undefined) socket.on('data', onAnswer);
  socket.on('error', onError);
  socket.on('close', onClose);
  const timer = setTimeout(() => fail({ kind: 'failed', reason: `no handshake within ${settings.timeoutMs} ms` }), settings.timeoutMs);
  return socket;
}

/** Node's `onread`: reads land in one buffer owned by the link; the reader keeps nothing past its call. */
function reusedReadBuffer(read: (chunk: Buffer) => void): { onread: { buffer: Buffer; callback: (bytes: number) => boolean }; onData: (chunk: Buffer) => void } {
  const buffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
  return {
    onread: {
      buffer,
      callback: (bytes) => {
        read(buffer.subarray(0, bytes));
        return true;
      },
    },
    onData: read,
  };
}
