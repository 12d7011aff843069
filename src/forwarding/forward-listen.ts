import { unlink } from 'node:fs/promises';
import { connect } from 'node:net';
import type { Server } from 'node:net';
import { SwitchyardError } from '../errors.js';
import { listen } from '../net/listen.js';


/**
 * Binds a Unix socket. A file left at the path by a crashed process is removed and the bind retried;
 * a path where something still answers is not taken over (a LISTEN_FAILED error).
 */
export async function listenUnix(server: Server, path: string): Promise<void> {
  try {
    await listen(server, { path });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || (await isListening(path))) {
      throw new SwitchyardError('LISTEN_FAILED', `forward listener cannot bind ${path}`, { cause: err });
    }
    await unlink(path);
    await listen(server, { path });
  }
}

function isListening(path: string): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const probe = connect({ path });
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => resolve(false));
  });
}
