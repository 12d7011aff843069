import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { Socket } from 'node:net';
import { SwitchyardError } from '../errors.js';

/**
 * The framing guard (http-server.ts, docs/http.md#framing) sits between each accepted socket and
 * Node's HTTP parser by taking Node's own `data` listener off the socket and calling it itself. A
 * Node release that fed its parser another way would leave the guard with nothing to take: every
 * request would reach the parser unchecked, silently. So the engine checks once, before it listens,
 * that a connection handed to an HTTP server gets exactly one `data` listener, and refuses to start
 * otherwise. `probe` makes the server to hand a connection to (a test passes one without Node's hook).
 */
export function checkParserHook(probe: () => Server = () => createServer()): void {
  const server = probe();
  const socket = new Socket();
  try {
    server.emit('connection', socket);
    const listeners = socket.listeners('data').length;
    if (listeners !== 1) {
      throw new SwitchyardError(
        'UNSUPPORTED_RUNTIME',
        `Node.js ${process.version} gives an accepted HTTP socket ${listeners} 'data' listeners, not the 1 the framing guard replaces: ` +
          'the guard cannot check request framing on this release, so the engine does not start (use a supported Node.js release, docs/http.md#framing)',
      );
    }
  } finally {
    socket.destroy();
    server.close();
  }
}
