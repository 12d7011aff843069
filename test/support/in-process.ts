import { parseConfig } from '../../src/config/load.js';
import { Engine } from '../../src/engine.js';
import { createRootLogger } from '../../src/observability/logger.js';
import { waitForStatus } from './http.js';
import { LineLog, startWorker, WORKER_READY_MS } from './processes.js';
import type { WorkerHandle } from './processes.js';

/**
 * One engine built in the test process (no primary, no child, no cluster) on loopback port 0, with
 * real HTTP and WebSocket listeners, closed on the next line. Its JSON log lines land in `stdout`,
 * as a spawned engine's do, so suites that need no process boundary switch by changing one call.
 */
export interface InProcessEngine {
  engine: Engine;
  httpUrl: string;
  workerUrl: string;
  stdout: LineLog;
  stop(): Promise<void>;
}

export interface InProcessOptions {
  /** iii-http config, merged over port 0 on loopback. */
  api?: Record<string, unknown>;
  /** iii-worker-manager config, merged over port 0 on loopback. */
  workers?: Record<string, unknown>;
  logLevel?: 'debug' | 'info' | 'warn';
  /** More `workers:` entries (iii modules such as `iii-queue`), after the two listeners. */
  modules?: { name: string; config?: Record<string, unknown> }[];
  env?: Record<string, string | undefined>;
}

export async function startInProcessEngine(options: InProcessOptions = {}): Promise<InProcessEngine> {
  const config = parseConfig({
    workers: [
      { name: 'iii-http', config: { host: '127.0.0.1', port: 0, ...options.api } },
      { name: 'iii-worker-manager', config: { host: '127.0.0.1', port: 0, ...options.workers } },
      ...(options.modules ?? []),
    ],
  });
  const stdout = new LineLog();
  const carry = { rest: '' };
  const logger = createRootLogger(options.logLevel ?? 'debug', { destination: { write: (chunk: string) => stdout.push(chunk, carry) } });
  const engine = new Engine({ config, logger, drainGraceMs: 2000, ...(options.env === undefined ? {} : { env: options.env }) });
  const ports = await engine.start();
  return {
    engine,
    httpUrl: `http://127.0.0.1:${ports.http}`,
    workerUrl: `ws://127.0.0.1:${ports.workers}`,
    stdout,
    stop: () => engine.close(),
  };
}

/** The in-process engine with the http-worker fixture (a real iii-sdk worker process) and all its routes. */
export async function startInProcessWithHttpWorker(options: InProcessOptions = {}): Promise<{ engine: InProcessEngine; worker: WorkerHandle }> {
  const engine = await startInProcessEngine(options);
  const worker = startWorker('http-worker', engine.workerUrl);
  // The fixture registers /ready last: once it answers, every route is in the table.
  await waitForStatus(`${engine.httpUrl}/ready`, (s) => s === 200, {}, WORKER_READY_MS);
  return { engine, worker };
}
