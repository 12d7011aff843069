import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import type { Socket } from 'node:net';

/**
 * A WebSocket client by hand over a TCP socket, for what no WebSocket library sends: a message left
 * unfinished (a frame's header and part of its payload, or the first fragments of a fragmented
 * message kept open with pongs). Loopback only.
 */
export interface RawWebSocket {
  socket: Socket;
  /** The upgrade's status: 101 when the socket is a WebSocket now. */
  status: number;
  /** The answer's body, when it was not 101 (an error envelope, say). */
  body: string;
  /** Resolves when the engine closed or cut the socket. */
  closed: Promise<void>;
}

/** Opens `url` (ws://host:port/path) with an upgrade request; resolves once the answer's head (and a non-101 body) is in. */
export function openRawWebSocket(url: string, headers: Record<string, string> = {}, timeoutMs = 30_000): Promise<RawWebSocket> {
  const { hostname, port, pathname, search } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const closed = new Promise<void>((done) => socket.once('close', () => done()));
    socket.on('error', () => undefined);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no upgrade answer from ${url} within ${timeoutMs} ms`));
    }, timeoutMs);
    let received = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = received.subarray(0, end).toString('latin1');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (status !== 101 && received.length < end + 4 + length) return;
      clearTimeout(timer);
      socket.off('data', onData);
      // The engine's frames to an attacker (pings, a close) are not read: they only wait in TCP.
      resolve({ socket, status, body: status === 101 ? '' : received.subarray(end + 4, end + 4 + length).toString('utf8'), closed });
    };
    socket.on('data', onData);
    socket.once('close', () => {
      clearTimeout(timer);
      reject(new Error(`${url} closed before answering the upgrade`));
    });
    socket.once('connect', () => {
      const extra = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
      socket.write(
        `GET ${pathname}${search} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`,
      );
    });
  });
}

const OPCODE = { continuation: 0x0, text: 0x1, binary: 0x2, pong: 0xa } as const;

/** A client frame's header (masked with an all-zero key, so the payload goes as it is). */
export function frameHeader(payloadLength: number, opcode: keyof typeof OPCODE = 'binary', fin = true): Buffer {
  const first = (fin ? 0x80 : 0) | OPCODE[opcode];
  if (payloadLength < 126) return Buffer.from([first, 0x80 | payloadLength, 0, 0, 0, 0]);
  if (payloadLength < 65536) {
    const header = Buffer.alloc(8);
    header[0] = first;
    header[1] = 0x80 | 126;
    header.writeUInt16BE(payloadLength, 2);
    return header;
  }
  const header = Buffer.alloc(14);
  header[0] = first;
  header[1] = 0x80 | 127;
  header.writeBigUInt64BE(BigInt(payloadLength), 2);
  return header;
}

/** A pong (unsolicited pongs are allowed): it keeps a connection alive through the engine's heartbeat. */
export const PONG = frameHeader(0, 'pong');

/**
 * Sends the first part of a message and stops: a binary frame's header declaring `declaredBytes`
 * and `sentBytes` of its payload. Resolves once the bytes are handed to the kernel.
 */
export function sendPartialFrame(ws: RawWebSocket, declaredBytes: number, sentBytes: number): Promise<void> {
  const payload = Buffer.alloc(sentBytes, 0x61);
  return new Promise((resolve) => ws.socket.write(Buffer.concat([frameHeader(declaredBytes), payload]), () => resolve()));
}

/**
 * Sends the first fragment (`bytes` of payload, whole) of a fragmented binary message that is never
 * finished, then a pong every `pongEveryMs` until the socket closes: the message stays unfinished
 * while the connection looks alive.
 */
export function sendOpenFragment(ws: RawWebSocket, bytes: number, pongEveryMs = 1000): Promise<void> {
  const timer = setInterval(() => {
    if (!ws.socket.destroyed) ws.socket.write(PONG);
  }, pongEveryMs);
  void ws.closed.then(() => clearInterval(timer));
  const payload = Buffer.alloc(bytes, 0x62);
  return new Promise((resolve) => ws.socket.write(Buffer.concat([frameHeader(bytes, 'binary', false), payload]), () => resolve()));
}
