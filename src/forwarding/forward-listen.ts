import { chmod, lstat, mkdir, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { connect } from 'node:net';
import type { Server } from 'node:net';
import { SwitchyardError } from '../errors.js';
import { listen } from '../net/listen.js';


/**
 * Binds a Unix socket. A file left at the path by a crashed process is removed and the bind retried;
 * a path where something still answers is not taken over (a LISTEN_FAILED error).
 */
export async function listenUnix(server: Server, path: string): Promise<void> {
  await privateDirectory(dirname(path));
  try {
    await listen(server, { path });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || (await isListening(path))) {
      throw new SwitchyardError('LISTEN_FAILED', `forward listener cannot bind ${path}`, { cause: err });
    }
    await unlink(path);
    await listen(server, { path });
  }
  // Only this user may connect (the directory already says so; the socket says it too).
  await chmod(path, 0o600);
}

/**
 * The directory of the forward sockets: created 0700, and refused when it is someone else's or a
 * symbolic link (another local user could otherwise plant or reach the sockets). docs/security.md.
 */
export async function privateDirectory(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const stat = await lstat(dir);
  const uid = process.getuid?.();
  if (!stat.isDirectory() || (uid !== undefined && stat.uid !== uid)) {
    throw new SwitchyardError('LISTEN_FAILED', `forward socket directory ${dir} is not a directory owned by this user; refusing to use it`);
  }
  if ((stat.mode & 0o077) !== 0) await chmod(dir, 0o700);
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
