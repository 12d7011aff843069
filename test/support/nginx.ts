import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ManagedProcess } from './processes.js';
import { ROOT, spawnManaged, stopProcess } from './processes.js';

/** Where Debian's `nginx` package puts the binary. */
export const NGINX_PATHS = ['/usr/sbin/nginx', '/usr/bin/nginx'];

/**
 * The nginx binary. Tests and benchmarks install nothing: scripts/prerequisites.sh does (README, Quick
 * start), so a missing nginx fails with that command named.
 */
export function nginxBinary(paths: readonly string[] = NGINX_PATHS): string {
  const found = paths.find((path) => existsSync(path));
  if (found !== undefined) return found;
  throw new Error(`nginx is not installed (looked in ${paths.join(', ')}): run scripts/prerequisites.sh (README, Quick start)`);
}

export interface NginxHandle {
  process: ManagedProcess;
  /** The directory holding the config, pid, logs and temp files (removed on stop). */
  dir: string;
  stop(): Promise<void>;
}

/**
 * A real nginx in the foreground on `conf` (a whole nginx.conf). `conf(dir)` is given a fresh directory
 * for its pid, logs and temp paths; `daemon off` and the pid path are added here, so the config only
 * needs what it is about.
 */
export function startNginx(conf: (dir: string) => string): NginxHandle {
  const binary = nginxBinary();
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-nginx-'));
  const text = [
    'daemon off;',
    `pid ${join(dir, 'nginx.pid')};`,
    conf(dir),
  ].join('\n');
  writeFileSync(join(dir, 'nginx.conf'), text);
  // -e: nginx >= 1.19.5 opens its default error log before reading the config; keep that in `dir` too.
  const process = spawnManaged(binary, ['-p', dir, '-e', join(dir, 'error.log'), '-c', join(dir, 'nginx.conf')], globalThis.process.env, ROOT, true);
  return {
    process,
    dir,
    stop: async () => {
      await stopProcess(process, 'SIGQUIT', 5000);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
