import { connect as netConnect } from 'node:net';
import type { Socket } from 'node:net';
import { connect as tlsConnect, createServer as tlsCreateServer } from 'node:tls';
import type { Server } from 'node:net';

/**
 * Mutual TLS for the TCP forward links between nodes (`switchyard-cluster` `forward_tls`): each node
 * presents its certificate and accepts only peers whose certificate the cluster CA signed; the dialled
 * address must be in the server certificate (advertise_host). Unix sockets (same host, a private
 * directory) do not use it. docs/security.md#between-nodes.
 */
export interface ForwardTls {
  cert: string;
  key: string;
  ca: string;
}

/** A forward listener's server: TLS with client certificates required, or plain TCP. */
export function forwardTcpServer(tls: ForwardTls | undefined, accept: (socket: Socket) => void, createPlain: (accept: (socket: Socket) => void) => Server): Server {
  if (tls === undefined) return createPlain(accept);
  return tlsCreateServer({ cert: tls.cert, key: tls.key, ca: tls.ca, requestCert: true, rejectUnauthorized: true }, accept);
}

/**
 * Dials a peer's TCP forward listener; `onReady` runs once the link can carry frames (after the TLS
 * handshake when TLS is on). Reads go to `onread` on plain TCP (one buffer reused, no per-read
 * allocation), to `onData` under TLS (node:tls delivers decrypted chunks of its own).
 */
export function dialForwardTcp(
  target: { host: string; port: number; tls?: ForwardTls },
  options: { onread?: { buffer: Buffer; callback: (bytes: number) => boolean }; onData?: (chunk: Buffer) => void; keepAliveInitialDelay?: number },
  onReady: () => void,
): Socket {
  if (target.tls === undefined) {
    const socket = netConnect({
      host: target.host,
      port: target.port,
      noDelay: true,
      ...(options.onread === undefined ? {} : { onread: options.onread }),
      ...(options.keepAliveInitialDelay === undefined ? {} : { keepAlive: true, keepAliveInitialDelay: options.keepAliveInitialDelay }),
    });
    socket.once('connect', onReady);
    return socket;
  }
  const { cert, key, ca } = target.tls;
  const socket = tlsConnect({ host: target.host, port: target.port, cert, key, ca });
  socket.setNoDelay(true);
  if (options.keepAliveInitialDelay !== undefined) socket.setKeepAlive(true, options.keepAliveInitialDelay);
  if (options.onData !== undefined) socket.on('data', options.onData);
  socket.once('secureConnect', onReady);
  return socket;
}
