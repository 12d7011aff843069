import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Closing a connection whose request body was left unread (413, 408: docs/http.md#bodies).
 *
 * Node's parser does not stop at such a request: it goes on parsing what the client sent after it, so
 * a request pipelined behind an over-limit body was still handed to the pipeline and reached its
 * handler, although its answer could never be sent. Such connections are marked the moment the body
 * read fails, and the pipeline drops every later request on them (`isClosing`).
 */
const closing = new WeakSet<Socket>();

/**
 * After the answer, a closing connection drains what the client still sends for at most this long
 * before it is destroyed. Node ends a `Connection: close` response with socket.destroySoon(): close(2)
 * as soon as the answer is flushed, and closing with unread bytes sends a TCP reset, which made a
 * client still uploading lose the 413 it had been sent (two runs in three in a test streaming a body).
 */
export const LINGER_MS = 1000;

export function markClosing(socket: Socket | undefined): void {
  if (socket !== undefined && socket !== null) closing.add(socket);
}

export function isClosing(socket: Socket | undefined): boolean {
  return socket !== undefined && socket !== null && closing.has(socket);
}

/**
 * Called before the answer is written: once it is sent, the socket half-closes (FIN after the
 * answer), discards the rest of the body while the client reads the answer, and is destroyed when the
 * client closes its side or LINGER_MS later, whichever comes first.
 */
export function closeAfterReply(req: IncomingMessage): void {
  const socket = req.socket;
  markClosing(socket);
  // Node calls destroySoon itself once a response with `Connection: close` is finished.
  socket.destroySoon = lingeringClose;
  req.resume();
}

const lingering = new WeakSet<Socket>();

function lingeringClose(this: Socket): void {
  if (this.destroyed || lingering.has(this)) return;
  lingering.add(this);
  this.end();
  const timer = setTimeout(() => this.destroy(), LINGER_MS);
  this.once('close', () => clearTimeout(timer));
}
