import type { ListenOptions, Server } from 'node:net';

/** `server.listen` as a promise that rejects with the listen error (EADDRINUSE, EACCES, …). */
export function listen(server: Server, options: ListenOptions): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen(options, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/**
 * The error listener of a socket handed to a server's 'upgrade' event. Node removes its own from such
 * sockets, so until ws (or whoever takes the socket) adds one, a peer's reset (ECONNRESET) would be an
 * uncaught 'error' that ends the process. The socket is closed by the reset anyway: nothing to do.
 */
export function ignoreSocketError(): void {
  // the socket is already gone; its owner (if any) sees the close
}
