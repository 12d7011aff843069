import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, spawnManaged, stopProcess } from '../support/processes.js';
import { http } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import { childPids, isRunning } from '../support/proc.js';

const BIN = join(ROOT, 'bin', 'switchyard.js');
const run = (args: string[], cwd = ROOT, env: NodeJS.ProcessEnv = {}) =>
  spawnManaged(process.execPath, [BIN, ...args], { ...process.env, ...env }, cwd);

const LOOPBACK_EPHEMERAL = `
port: 0
modules:
  - class: modules::api::RestApiModule
    config: { host: 127.0.0.1, port: \${HTTP_PORT:0} }
  - class: modules::workers::WorkerModule
    config: { host: 127.0.0.1 }
  - class: modules::admin::AdminModule
    config: { host: 127.0.0.1, port: 0 }
  - class: modules::stream::StreamModule
    config: { port: 3112 }
`;

describe('switchyard command line', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'switchyard-cli-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('warns at start about a worker port open beyond loopback without a token', async () => {
    const cwd = join(dir, 'exposed');
    await import('node:fs/promises').then((fs) => fs.mkdir(cwd, { recursive: true }));
    await writeFile(join(cwd, 'config.yaml'), LOOPBACK_EPHEMERAL.replace('config: { host: 127.0.0.1 }', 'config: { host: 0.0.0.0 }'));
    const p = run(['--log-level', 'info'], cwd);
    await p.stdout.waitFor((l) => l.includes('switchyard ready'), 30_000);
    const warnings = p.stdout.json().filter((l) => l.msg?.toString().includes('reachable beyond loopback'));
    expect(warnings.map((l) => [l.listener, l.host])).toEqual([['workers', '0.0.0.0']]);
    expect(await stopProcess(p, 'SIGINT')).toEqual({ code: 0, signal: null });
  });

  it('loads ./config.yaml from the working directory, warns about unknown module classes, exits 0 on SIGINT', async () => {
    const cwd = join(dir, 'cwd');
    await import('node:fs/promises').then((fs) => fs.mkdir(cwd, { recursive: true }));
    await writeFile(join(cwd, 'config.yaml'), LOOPBACK_EPHEMERAL);
    const p = run(['--log-level', 'info'], cwd);
    const ready = JSON.parse(await p.stdout.waitFor((l) => l.includes('switchyard ready'), 30_000)) as Record<string, unknown>;
    expect(ready.config).toMatch(/config\.yaml$/);
    expect(p.stdout.json().some((l) => l.msg?.toString().includes('skipped') && l.skippedModule === 'modules::stream::StreamModule')).toBe(true);
    // Every listener of this config is on loopback: no exposure warning.
    expect(p.stdout.json().filter((l) => l.msg?.toString().includes('reachable beyond loopback'))).toEqual([]);
    const health = await http(`http://127.0.0.1:${String(ready.admin)}/healthz`);
    expect(health.status).toBe(200);
    const readiness = await http(`http://127.0.0.1:${String(ready.admin)}/readyz`);
    expect(readiness.status).toBe(200);
    expect(await stopProcess(p, 'SIGINT')).toEqual({ code: 0, signal: null });
  });

  it('reports every invalid value and unknown key with its path and exits 1', async () => {
    const file = join(dir, 'bad.yaml');
    await writeFile(
      file,
      `modules:
  - class: modules::api::RestApiModule
    config: { port: 99999, body_limit: -1, colour: blue }
`,
    );
    const p = run(['--config', file]);
    const { code } = await p.exited;
    expect(code).toBe(1);
    const stderr = p.stderr.lines.join('\n');
    expect(stderr).toContain('CONFIG_INVALID');
    expect(stderr).toContain('.config.port');
    expect(stderr).toContain('.config.body_limit');
    expect(stderr).toContain('colour');
  });

  it('exits 1 with CONFIG_UNREADABLE for a missing --config file', async () => {
    const p = run(['--config', join(dir, 'nope.yaml')]);
    expect((await p.exited).code).toBe(1);
    expect(p.stderr.lines.join('\n')).toContain('CONFIG_UNREADABLE');
  });

  it('exits 2 with USAGE for an unknown argument, and prints help with --help', async () => {
    const bad = run(['--frobnicate']);
    expect((await bad.exited).code).toBe(2);
    expect(bad.stderr.lines.join('\n')).toContain('USAGE');
    const help = run(['--help']);
    expect((await help.exited).code).toBe(0);
    expect(help.stdout.lines.join('\n')).toContain('--config FILE');
  });

  it('exits 1 with LISTEN_FAILED when the HTTP port is taken', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as AddressInfo).port;
    try {
      const file = join(dir, 'taken.yaml');
      await writeFile(file, LOOPBACK_EPHEMERAL);
      const p = run(['--config', file], ROOT, { HTTP_PORT: String(port) });
      expect((await p.exited).code).toBe(1);
      expect(p.stderr.lines.join('\n')).toContain('LISTEN_FAILED');
      // The error names the config key to change.
      expect(p.stderr.lines.join('\n')).toContain(`port ${port} is in use by another process; set iii-http port to another port`);
    } finally {
      blocker.close();
    }
  });

  it('refuses a module name close to a known one with "did you mean", and starts nothing', async () => {
    const file = join(dir, 'typo.yaml');
    await writeFile(file, 'workers:\n  - name: iii-htpp\n    config: { port: 3111 }\n');
    const p = run(['--config', file]);
    expect((await p.exited).code).toBe(1);
    const stderr = p.stderr.lines.join('\n');
    expect(stderr).toContain('CONFIG_INVALID');
    expect(stderr).toContain('unknown module "iii-htpp"; did you mean "iii-http"?');
  });

  it('ends start-up with a ready line that gives the URLs and one next step', async () => {
    const file = join(dir, 'first-screen.yaml');
    await writeFile(file, LOOPBACK_EPHEMERAL);
    const p = run(['--config', file, '--log-level', 'info']);
    const ready = JSON.parse(await p.stdout.waitFor((l) => l.includes('switchyard ready'), 30_000)) as {
      http: number;
      workers: number;
      admin: number;
      urls: { http: string; workers: string; console: string };
      next: string;
    };
    expect(ready.urls).toEqual({ http: `http://127.0.0.1:${ready.http}/`, workers: `ws://127.0.0.1:${ready.workers}`, console: `http://127.0.0.1:${ready.admin}/` });
    expect(ready.next).toContain(`connect a worker to ${ready.urls.workers}`);
    // The URLs answer: the console page and the HTTP listener (404 with no route yet).
    expect((await http(ready.urls.console)).status).toBe(200);
    expect((await http(`${ready.urls.http}nothing-yet`)).status).toBe(404);
    expect(await stopProcess(p, 'SIGINT')).toEqual({ code: 0, signal: null });
  });

  it('started by an npm script, shuts down when the script\'s process goes away without passing a signal on', async () => {
    const file = join(dir, 'npm-parent.yaml');
    await writeFile(file, LOOPBACK_EPHEMERAL);
    // What `npm start` does: a shell runs the engine, with npm's lifecycle variables set. `; true` keeps
    // the shell as the engine's parent (it would otherwise exec the engine in its place).
    const shell = spawnManaged('/bin/sh', ['-c', `"${process.execPath}" "${BIN}" --config "${file}" --log-level info; true`], {
      ...process.env,
      npm_lifecycle_event: 'start',
    });
    await shell.stdout.waitFor((l) => l.includes('switchyard ready'), 30_000);
    const [engine] = childPids(shell.child.pid as number);
    expect(engine).toBeDefined();
    const children = childPids(engine as number);
    expect(children.length).toBeGreaterThan(0);
    // npm 11 on SIGTERM: it exits, the engine is not told.
    shell.child.kill('SIGKILL');
    try {
      await waitUntil(() => ![engine as number, ...children].some(isRunning), 20_000, 'the engine and its children to exit');
    } finally {
      for (const pid of [engine as number, ...children].filter(isRunning)) process.kill(pid, 'SIGKILL');
    }
    const stopping = shell.stdout.json().find((l) => l.msg === 'shutting down');
    expect(stopping?.reason).toBe('the npm script that started the engine exited');
    expect(shell.stdout.json().some((l) => l.msg === 'stopped')).toBe(true);
  });
});
