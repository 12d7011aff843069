// Forward sockets on one host: only the user running the engine can reach them (issue 15, point 4).
import { mkdtemp, mkdir, rm, stat, symlink, chmod } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { listenUnix, privateDirectory } from '../../src/forwarding/forward-listen.js';
import { forwardSocketPath } from '../../src/supervisor/child-engine.js';

describe('forward sockets live in a private directory, mode 0600', () => {
  const made: string[] = [];
  const tempBase = async (): Promise<string> => {
    const base = await mkdtemp(join(tmpdir(), 'switchyard-sock-'));
    made.push(base);
    return base;
  };
  afterEach(async () => {
    await Promise.all(made.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
  });

  it('binds the socket 0600 in a directory made 0700', async () => {
    const base = await tempBase();
    const dir = join(base, 'forward');
    const path = join(dir, 'peer.sock');
    const server = createServer();
    await listenUnix(server, path);
    try {
      expect((await stat(dir)).mode & 0o777).toBe(0o700);
      expect((await stat(path)).mode & 0o777).toBe(0o600);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('tightens a directory others can read, and refuses a symbolic link in its place', async () => {
    const base = await tempBase();
    const loose = join(base, 'loose');
    await mkdir(loose);
    await chmod(loose, 0o755);
    await privateDirectory(loose);
    expect((await stat(loose)).mode & 0o777).toBe(0o700);
    const link = join(base, 'link');
    await symlink(loose, link);
    await expect(privateDirectory(link)).rejects.toThrow(/not a directory owned by this user/);
  });

  it("names each engine process's socket under a directory of the user's own", () => {
    const path = forwardSocketPath('node-a/0/x');
    expect(path.startsWith(join(tmpdir(), `switchyard-${process.getuid?.() ?? 'user'}`))).toBe(true);
    expect(Buffer.byteLength(path)).toBeLessThan(104);
  });
});
