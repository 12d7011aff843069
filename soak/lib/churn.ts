import { join } from 'node:path';
import { request } from 'undici';
import type { ManagedProcess } from '../../test/support/processes.js';
import { ROOT, spawnManaged, stopProcess } from '../../test/support/processes.js';
import { RawWorker } from '../../test/support/raw-worker.js';

/**
 * Worker churn for the soak: a new worker every `intervalMs` (±25 %), each registering a few functions,
 * routes and a scoped middleware under ids no other worker uses, serving for `lifeMinMs`–`lifeMaxMs`,
 * then leaving. A share of them are raw `ws` workers living inside the soak process, the rest are
 * iii-sdk worker processes (soak/workers/sdk-worker.mjs). They leave cleanly (SIGTERM → SDK shutdown,
 * or a WebSocket close), abruptly (SIGKILL, or the socket destroyed without a close frame) or, for a
 * share of the SDK workers, frozen: SIGSTOP, so that only the engine's heartbeat can drop them, then
 * SIGKILL once it must have (`freezeMs` later).
 */
export const SDK_WORKER = join(ROOT, 'soak', 'workers', 'sdk-worker.mjs');
const READY_DEADLINE_MS = 20_000;
/** A leaving worker's routes leave the load this long before the worker does, so few requests race it. */
const LEAVE_NOTICE_MS = 250;

export interface ChurnOptions {
  workerUrl: string;
  httpUrl: string;
  intervalMs: number;
  lifeMinMs: number;
  lifeMaxMs: number;
  /** Share of churned workers that are raw `ws` workers (0–1). */
  rawShare: number;
  /** Functions (and routes) per churned worker. */
  functions: number;
  /** Share of SDK workers that end frozen (0–1); the rest split evenly between clean and killed. */
  freezeShare: number;
  /** How long a frozen worker stays stopped before it is killed (past the engine's heartbeat timeout). */
  freezeMs: number;
  /** Called once per worker that left, with one of its routes (to probe that the route is gone). */
  onDeparted(path: string): void;
}

export interface ChurnCounts {
  started: number;
  sdk: number;
  raw: number;
  ready: number;
  failedToStart: number;
  leftCleanly: number;
  killed: number;
  frozen: number;
}

type Ending = 'clean' | 'abrupt' | 'frozen';

interface Churned {
  key: string;
  kind: 'sdk' | 'raw';
  routes: string[];
  serving: boolean;
  /** Leaves cleanly (SIGTERM, close frame), abruptly (SIGKILL, socket destroyed) or frozen (SIGSTOP). */
  ending: Ending;
  end(): Promise<void>;
}

function sdkWorkerEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  // The engine runs with an inspector in NODE_OPTIONS; workers must not inherit it.
  const env: NodeJS.ProcessEnv = { ...process.env, OTEL_ENABLED: 'false', ...extra };
  delete env.NODE_OPTIONS;
  return env;
}

/** Starts an iii-sdk worker process; `ROLE=main` for the long-lived routes. */
export function startSdkWorker(workerUrl: string, env: NodeJS.ProcessEnv): ManagedProcess {
  return spawnManaged(process.execPath, [SDK_WORKER], sdkWorkerEnv({ III_URL: workerUrl, ...env }));
}

/** Polls GET `path` until it answers 200 (deadline `timeoutMs`). */
export async function waitServed(httpUrl: string, path: string, timeoutMs = READY_DEADLINE_MS): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const res = await request(httpUrl + path, { headersTimeout: 5000, bodyTimeout: 5000 });
      await res.body.dump();
      if (res.statusCode === 200) return true;
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

export class Churn {
  readonly counts: ChurnCounts = { started: 0, sdk: 0, raw: 0, ready: 0, failedToStart: 0, leftCleanly: 0, killed: 0, frozen: 0 };
  private readonly workers = new Set<Churned>();
  private readonly lifecycles = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;
  private serial = 0;

  constructor(private readonly options: ChurnOptions) {}

  start(): void {
    const schedule = (): void => {
      if (this.stopping) return;
      const jitter = 0.75 + Math.random() * 0.5;
      this.timer = setTimeout(() => {
        this.spawnOne();
        schedule();
      }, this.options.intervalMs * jitter);
    };
    this.spawnOne();
    schedule();
  }

  /** A route of a worker that is serving, picked at random; undefined when none is. */
  randomRoute(): string | undefined {
    const serving = [...this.workers].filter((w) => w.serving);
    const worker = serving[Math.floor(Math.random() * serving.length)];
    return worker?.routes[Math.floor(Math.random() * worker.routes.length)];
  }

  /** Churned workers alive now (started and not yet gone). */
  alive(): number {
    return this.workers.size;
  }

  /** Stops spawning and ends every churned worker the way it was going to end, waiting for all of them. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    await Promise.all([...this.lifecycles]);
  }

  private spawnOne(): void {
    const key = `w${++this.serial}x${Math.random().toString(36).slice(2, 8)}`;
    const kind = Math.random() < this.options.rawShare ? 'raw' : 'sdk';
    const ending: Ending = kind === 'sdk' && Math.random() < this.options.freezeShare ? 'frozen' : Math.random() < 0.5 ? 'abrupt' : 'clean';
    const lifeMs = this.options.lifeMinMs + Math.random() * (this.options.lifeMaxMs - this.options.lifeMinMs);
    const routes = Array.from({ length: this.options.functions }, (_, i) => `/soak/churn/${key}/f${i}`);
    this.counts.started++;
    this.counts[kind]++;
    const lifecycle = (kind === 'sdk' ? this.sdkLife(key, routes, lifeMs, ending) : this.rawLife(key, routes, lifeMs, ending)).catch(() => {
      this.counts.failedToStart++;
    });
    this.lifecycles.add(lifecycle);
    void lifecycle.finally(() => this.lifecycles.delete(lifecycle));
  }

  /** Lives until `lifeMs` after it started or the churn stops, whichever is first. */
  private async serve(worker: Churned, lifeMs: number, bornAt: number): Promise<void> {
    this.workers.add(worker);
    let ready = false;
    try {
      if (!(await waitServed(this.options.httpUrl, worker.routes[0] as string))) throw new Error(`${worker.key} never served`);
      ready = true;
      this.counts.ready++;
      worker.serving = true;
      while (!this.stopping && Date.now() - bornAt < lifeMs) {
        await new Promise((r) => setTimeout(r, Math.min(250, lifeMs - (Date.now() - bornAt))));
      }
      worker.serving = false;
      await new Promise((r) => setTimeout(r, LEAVE_NOTICE_MS));
    } finally {
      worker.serving = false;
      await worker.end();
      this.workers.delete(worker);
      if (ready) this.counts[worker.ending === 'clean' ? 'leftCleanly' : worker.ending === 'abrupt' ? 'killed' : 'frozen']++;
    }
    this.options.onDeparted(worker.routes[worker.routes.length - 1] as string);
  }

  private async sdkLife(key: string, routes: string[], lifeMs: number, ending: Ending): Promise<void> {
    const bornAt = Date.now();
    const p = startSdkWorker(this.options.workerUrl, { ROLE: 'churn', KEY: key, FUNCS: String(routes.length) });
    const worker: Churned = {
      key,
      kind: 'sdk',
      routes,
      serving: false,
      ending,
      end: async () => {
        if (ending === 'frozen' && p.child.exitCode === null && p.child.signalCode === null) {
          p.child.kill('SIGSTOP');
          await new Promise((r) => setTimeout(r, this.options.freezeMs));
        }
        await stopProcess(p, ending === 'clean' ? 'SIGTERM' : 'SIGKILL', 5000);
      },
    };
    await this.serve(worker, lifeMs, bornAt);
  }

  private async rawLife(key: string, routes: string[], lifeMs: number, ending: Ending): Promise<void> {
    const bornAt = Date.now();
    const raw = await RawWorker.connect(this.options.workerUrl);
    routes.forEach((path, i) => {
      const functionId = `soak::${key}::f${i}`;
      raw.route(functionId, 'GET', path);
      raw.serve(functionId, () => ({ status_code: 200, headers: { 'content-type': 'application/json' }, body: { key, f: i } }));
    });
    const worker: Churned = {
      key,
      kind: 'raw',
      routes,
      serving: false,
      ending,
      end: async () => {
        if (ending === 'abrupt') raw.ws.terminate();
        else raw.ws.close();
        await raw.closed;
      },
    };
    await this.serve(worker, lifeMs, bornAt);
  }
}
