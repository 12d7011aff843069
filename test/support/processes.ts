import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { waitForStatus } from './http.js';
import { freePort } from './redis.js';

/** Real processes for integration tests: the built engine and iii-sdk workers. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const ENGINE_BIN = join(ROOT, 'bin', 'switchyard.js');
export const FIXTURES = join(ROOT, 'test', 'fixtures', 'workers');

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) {
    try {
      // Engines run in their own process group: take their children along.
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  }
});

export class LineLog {
  readonly lines: string[] = [];
  private waiters: { test: (line: string) => boolean; resolve: (line: string) => void }[] = [];

  push(chunk: string, carry: { rest: string }): void {
    const text = carry.rest + chunk;
    const parts = text.split('\n');
    carry.rest = parts.pop() ?? '';
    for (const line of parts) {
      this.lines.push(line);
      this.waiters = this.waiters.filter((w) => {
        if (!w.test(line)) return true;
        w.resolve(line);
        return false;
      });
    }
  }

  /** Resolves with the first line (already seen or future) that passes `test`; rejects at the deadline. */
  waitFor(test: (line: string) => boolean, timeoutMs = 10_000, what = 'log line'): Promise<string> {
    const seen = this.lines.find(test);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise<string>((resolvePromise, reject) => {
      const waiter = {
        test,
        resolve: (line: string) => {
          clearTimeout(timer);
          resolvePromise(line);
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last lines:\n${this.lines.slice(-15).join('\n')}`));
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  /** Parsed JSON log lines (pino), non-JSON lines skipped. */
  json(): Record<string, unknown>[] {
    const out: Record<string, unknown>[] = [];
    for (const line of this.lines) {
      try {
        out.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // not a JSON line
      }
    }
    return out;
  }
}

export interface ManagedProcess {
  child: ChildProcess;
  stdout: LineLog;
  stderr: LineLog;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function spawnManaged(command: string, args: string[], env: NodeJS.ProcessEnv, cwd = ROOT, detached = false): ManagedProcess {
  // detached: its own process group, so a whole engine (primary and children) can be killed at once.
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached });
  live.add(child);
  const stdout = new LineLog();
  const stderr = new LineLog();
  const outCarry = { rest: '' };
  const errCarry = { rest: '' };
  child.stdout?.setEncoding('utf8').on('data', (d: string) => stdout.push(d, outCarry));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => stderr.push(d, errCarry));
  const exited = once(child, 'exit').then(([code, signal]) => {
    live.delete(child);
    return { code: code as number | null, signal: signal as NodeJS.Signals | null };
  });
  return { child, stdout, stderr, exited };
}

/** Sends a signal and waits for the exit, escalating to SIGKILL after `timeoutMs`. */
export async function stopProcess(p: ManagedProcess, signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 10_000) {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return p.exited;
  p.child.kill(signal);
  const timer = setTimeout(() => p.child.kill('SIGKILL'), timeoutMs);
  const result = await p.exited;
  clearTimeout(timer);
  return result;
}

/** Polls /readyz until 200 (15 s deadline unless given) and returns the ports it reports. */
async function waitReady(adminPort: number, p: ManagedProcess, timeoutMs = 15_000): Promise<{ http: number; workers: number }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const res = await request(`http://127.0.0.1:${adminPort}/readyz`, { headersTimeout: 2000, bodyTimeout: 2000 });
      const body = (await res.body.json()) as { http?: number; workers?: number };
      if (res.statusCode === 200 && body.http !== undefined && body.workers !== undefined) {
        return { http: body.http, workers: body.workers };
      }
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      throw new Error(`engine not ready within ${timeoutMs / 1000} s; stdout:\n${p.stdout.lines.slice(-15).join('\n')}\nstderr:\n${p.stderr.lines.slice(-15).join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

export interface EngineHandle extends ManagedProcess {
  httpUrl: string;
  workerUrl: string;
  adminUrl: string;
  ports: { http: number; workers: number; admin: number };
  configPath: string;
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL to the primary and every child at once: a host vanishing without a goodbye. */
  killAll(): Promise<void>;
}

export interface EngineOptions {
  /** The engine's entry script (default: this checkout's bin/switchyard.js; the bench's --against mode runs an older build). */
  engineBin?: string;
  /** RestApiModule config, merged over ports 0 on loopback. */
  api?: Record<string, unknown>;
  /** WorkerModule config. */
  workers?: Record<string, unknown>;
  /** ClusterModule config; tests run one child unless they ask for more. */
  cluster?: Record<string, unknown>;
  /** Extra module entries appended to `modules` (by class or by name). */
  modules?: { class?: string; name?: string; config?: Record<string, unknown> }[];
  /**
   * The whole config file instead, as YAML (iii 0.22's `workers:` form), given the admin port the
   * harness polls for readiness: the test writes every module itself.
   */
  yaml?: (adminPort: number) => string;
  env?: NodeJS.ProcessEnv;
  logLevel?: string;
  /** Node flags for the engine (children inherit them), e.g. `--cpu-prof`. */
  nodeArgs?: string[];
  /** How long to wait for /readyz (default 15 s): several children start slowly on a loaded machine. */
  readyTimeoutMs?: number;
}

/** Starts `switchyard --config <tmp>` on ephemeral loopback ports; resolves when /readyz answers 200. */
export async function startEngine(options: EngineOptions = {}): Promise<EngineHandle> {
  const dir = await mkdtemp(join(tmpdir(), 'switchyard-test-'));
  const configPath = join(dir, options.yaml === undefined ? 'config.json' : 'config.yaml');
  // The admin port is chosen here (the harness polls it), so between its choice and the engine's bind
  // another process may take it; an engine that could not bind it is started again on another.
  for (let attempt = 1; ; attempt++) {
    const adminPort = await freePort();
    const config = {
      modules: [
        { class: 'modules::api::RestApiModule', config: { host: '127.0.0.1', port: 0, ...options.api } },
        { class: 'modules::workers::WorkerModule', config: { host: '127.0.0.1', port: 0, ...options.workers } },
        { class: 'modules::admin::AdminModule', config: { host: '127.0.0.1', port: adminPort } },
        { class: 'modules::cluster::ClusterModule', config: { processes: 1, ...options.cluster } },
        ...(options.modules ?? []),
      ],
    };
    await writeFile(configPath, options.yaml === undefined ? JSON.stringify(config) : options.yaml(adminPort));
    const p = spawnManaged(
      process.execPath,
      [...(options.nodeArgs ?? []), options.engineBin ?? ENGINE_BIN, '--config', configPath, '--log-level', options.logLevel ?? 'debug'],
      { ...process.env, ...options.env },
      ROOT,
      true,
    );
    const exitedEarly = p.exited.then((r) => {
      throw new Error(`engine exited before ready (${JSON.stringify(r)}):\n${p.stderr.lines.join('\n')}\n${p.stdout.lines.slice(-10).join('\n')}`);
    });
    let ready: Awaited<ReturnType<typeof waitReady>>;
    try {
      // Readiness comes from /readyz (it also reports the bound ports), so it works at any log level.
      ready = await Promise.race([waitReady(adminPort, p, options.readyTimeoutMs), exitedEarly]);
    } catch (err) {
      // Whatever is left of this engine (a primary still waiting, its children) goes before another
      // try or the error: a failed start leaves no process and no directory behind.
      await killGroup(p);
      const adminTaken = p.stderr.lines.some((line) => line.includes(`cannot bind 127.0.0.1:${adminPort}`) && line.includes('EADDRINUSE'));
      if (adminTaken && attempt < 3) continue;
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
    return engineHandle(p, exitedEarly, dir, configPath, adminPort, ready);
  }
}

/** SIGKILL to the process and its whole group at once (an engine's primary and children); resolves on its exit. */
async function killGroup(p: ManagedProcess): Promise<void> {
  if (p.child.pid !== undefined && p.child.exitCode === null && p.child.signalCode === null) {
    process.kill(-p.child.pid, 'SIGKILL');
  }
  await p.exited;
}

function engineHandle(
  p: ManagedProcess,
  exitedEarly: Promise<never>,
  dir: string,
  configPath: string,
  adminPort: number,
  ready: Awaited<ReturnType<typeof waitReady>>,
): EngineHandle {
  exitedEarly.catch(() => undefined);
  // Awaited by stop(): a test file that ends right after stopping its engine leaves no directory.
  const removed = p.exited.then(() => rm(dir, { recursive: true, force: true }));
  return {
    ...p,
    ports: { http: ready.http, workers: ready.workers, admin: adminPort },
    httpUrl: `http://127.0.0.1:${ready.http}`,
    workerUrl: `ws://127.0.0.1:${ready.workers}`,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    configPath,
    stop: async (signal = 'SIGTERM') => {
      const result = await stopProcess(p, signal);
      await removed;
      return result;
    },
    killAll: async () => {
      await killGroup(p);
      await removed;
    },
  };
}

export interface WorkerHandle extends ManagedProcess {
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `test/fixtures/workers/<name>.mjs` (a real iii-sdk worker) against `workerUrl`. */
export function startWorker(name: string, workerUrl: string, env: NodeJS.ProcessEnv = {}): WorkerHandle {
  const p = spawnManaged(process.execPath, [join(FIXTURES, `${name}.mjs`)], {
    ...process.env,
    OTEL_ENABLED: 'false',
    III_URL: workerUrl,
    ...env,
  });
  return { ...p, stop: (signal = 'SIGTERM') => stopProcess(p, signal, 5000) };
}

/** How long a fixture worker may take to connect and register its routes on a loaded 2-core machine. */
export const WORKER_READY_MS = 20_000;

/**
 * `reconnect_grace_ms` for suites whose workers leave on purpose: their routes go within 0.2 s instead
 * of after the default 5 s grace. The grace itself is tested in reliability.test.ts and middleware-grace.
 */
export const QUICK_GRACE_MS = 200;

/** An engine with the http-worker fixture connected and every one of its routes registered. */
export async function startEngineWithHttpWorker(options: EngineOptions = {}): Promise<{ engine: EngineHandle; worker: WorkerHandle }> {
  const engine = await startEngine(options);
  const worker = startWorker('http-worker', engine.workerUrl);
  // The fixture registers /ready last: once it answers, every route is in the table.
  await waitForStatus(`${engine.httpUrl}/ready`, (s) => s === 200, {}, WORKER_READY_MS);
  return { engine, worker };
}

/** Stops workers before engines, in the order given, skipping what never started. */
export async function stopAll(...handles: ({ stop(): Promise<unknown> } | undefined)[]): Promise<void> {
  for (const handle of handles) await handle?.stop();
}
