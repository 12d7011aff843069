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
