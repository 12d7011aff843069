/**
 * What an engine child carries (docs/performance.md, "Memory: what a child loads"): libraries the
 * default configuration does not use stay out of its memory. Every module URL the child loads is
 * recorded by a `node --import` hook (test/fixtures/module-log/), then checked after the child has
 * served requests through the whole pipeline.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { waitForStatus } from '../support/http.js';
import { startEngine, startWorker, stopAll, WORKER_READY_MS } from '../support/processes.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';

const HOOK = pathToFileURL(join(import.meta.dirname, '../fixtures/module-log/register.mjs')).href;

/** Libraries only some configurations use, by the path their files load from. */
const OPTIONAL = {
  zod: '/node_modules/zod/',
  'OpenTelemetry SDK': '/node_modules/@opentelemetry/sdk-trace-base/',
  'OTLP exporter': '/node_modules/@opentelemetry/exporter-trace-otlp-http/',
  undici: '/node_modules/undici/',
  ioredis: '/node_modules/ioredis/',
};

describe('modules an engine child loads', () => {
  let engine: EngineHandle | undefined;
  let worker: WorkerHandle | undefined;
  let dir: string | undefined;

  afterEach(async () => {
    await stopAll(worker, engine);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    engine = undefined;
    worker = undefined;
    dir = undefined;
  });

  /** Starts an engine with the hook, serves a few requests through a real iii-sdk worker, returns the child's module URLs. */
  async function childModules(modules: { name: string; config: Record<string, unknown> }[] = []): Promise<string> {
    dir = await mkdtemp(join(tmpdir(), 'switchyard-modules-'));
    engine = await startEngine({ nodeArgs: ['--import', HOOK], env: { MODULE_LOG_DIR: dir }, modules });
    worker = startWorker('http-worker', engine.workerUrl);
    await waitForStatus(`${engine.httpUrl}/ready`, (s) => s === 200, {}, WORKER_READY_MS);
    for (let i = 0; i < 5; i++) {
      const res = await request(`${engine.httpUrl}/users/${i}`);
      await res.body.dump();
      expect(res.statusCode).toBe(200);
    }
    const ready = (await (await request(`${engine.adminUrl}/readyz`)).body.json()) as { children: { pid: number }[] };
    const pid = ready.children[0]?.pid;
    expect(pid).toBeTypeOf('number');
    return readFile(join(dir, `${pid}.log`), 'utf8');
  }

  it('with the default configuration: no zod, no OpenTelemetry SDK, no undici, no ioredis', async () => {
    const loaded = await childModules();
    // The hook sees what the child does load: the engine's own code and ws.
    expect(loaded).toContain('/dist/engine.js');
    expect(loaded).toContain('/node_modules/ws/');
    for (const [name, path] of Object.entries(OPTIONAL)) expect(loaded.includes(path), `${name} loaded`).toBe(false);
  }, 60_000);

  it('with an OTLP exporter configured: the OpenTelemetry SDK is loaded before the child serves', async () => {
    const loaded = await childModules([
      // Nothing listens there: spans are dropped and counted, requests are served all the same.
      { name: 'iii-observability', config: { enabled: true, exporter: 'otlp', endpoint: 'http://127.0.0.1:9', sampling_ratio: 1 } },
    ]);
    expect(loaded).toContain(OPTIONAL['OpenTelemetry SDK']);
    expect(loaded).toContain(OPTIONAL['OTLP exporter']);
    expect(loaded.includes(OPTIONAL.zod), 'zod loaded').toBe(false);
  }, 60_000);
});
