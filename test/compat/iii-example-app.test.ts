// An app written the way iii's example app is (test/fixtures/iii-example-app/app.mjs: iii-sdk 0.22.1,
// a useApi() hook, Logger, trigger metadata, TriggerAction.Enqueue with and without a provider), run
// as its own process against a two-process engine, as a new user would move it over.
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForEveryProcess, waitForStatus } from '../support/http.js';
import type { EngineHandle, ManagedProcess } from '../support/processes.js';
import { ROOT, WORKER_READY_MS, spawnManaged, startEngine, stopProcess } from '../support/processes.js';

const APP_DIR = join(ROOT, 'test', 'fixtures', 'iii-example-app');

function startApp(file: string, engine: EngineHandle): ManagedProcess {
  // Telemetry on, as the example app has it: its Logger's records travel on the telemetry socket.
  return spawnManaged(process.execPath, [join(APP_DIR, file)], { ...process.env, III_URL: engine.workerUrl, OTEL_ENABLED: 'true' });
}

/** The engine's JSON log lines whose message is `msg`. */
function engineLines(engine: EngineHandle, msg: string): Record<string, unknown>[] {
  return engine.stdout.json().filter((line) => line.msg === msg);
}

async function metric(engine: EngineHandle, name: string, labels = ''): Promise<number> {
  const text = await (await request(`${engine.adminUrl}/metrics`)).body.text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(name) && line.includes(labels) && !line.startsWith('#'))
    .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}

describe('an app written like iii-example, on a two-process engine', () => {
  let engine: EngineHandle;
  let app: ManagedProcess;
  const others: ManagedProcess[] = [];

  beforeAll(async () => {
    engine = await startEngine({ cluster: { processes: 2 }, logLevel: 'info' });
    app = startApp('app.mjs', engine);
    await waitForStatus(`${engine.httpUrl}/todo`, (s) => s !== 404, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }, WORKER_READY_MS);
  });
  afterAll(async () => {
    for (const p of others) await stopProcess(p);
    if (app !== undefined) await stopProcess(app);
    await engine?.stop();
  });

  it('the route\'s metadata reaches the handler on every process, and its Logger lines reach the engine\'s log', async () => {
    const url = `${engine.httpUrl}/todo`;
    const init = { method: 'POST', headers: { 'content-type': 'application/json', connection: 'close' }, body: '{"description":"buy milk"}' };
    for (let i = 0; i < 4; i++) {
      const res = await http(url, init);
      expect(res.status).toBe(201);
      expect(res.json()).toMatchObject({ description: 'buy milk', metadata: { tags: ['todo'] } });
    }
    // iii prints workers' log records by default (logs_console_output): at their level, with the
    // function that logged, the trace and span ids and the data.
    await engine.stdout.waitFor((l) => l.includes('"Creating new todo"') && l.includes('buy milk'), 15_000, 'the app\'s log line in the engine\'s log');
    const line = engineLines(engine, 'Creating new todo').find((l) => JSON.stringify(l.data).includes('buy milk'));
    expect(line).toMatchObject({ level: 30, module: 'worker-log', service: 'iii-example', function: 'api::post::todo', data: { body: { description: 'buy milk' } } });
    expect(line?.trace_id).toMatch(/^[0-9a-f]{32}$/);
    expect(line?.span_id).toMatch(/^[0-9a-f]{16}$/);

    // With the worker's id: learned from the trace the engine sent the handler (asking the sibling
    // child when the telemetry socket is on the other one) or from the SDK's metrics (its worker gauges
    // carry worker.id); test/compat/worker-log-attribution.test.ts holds it without metrics.
    const workers = (await http(`${engine.adminUrl}/workers`)).json<{ id: string; name?: string }[]>();
    const appId = workers.find((w) => w.name === 'iii-example-app')?.id;
    expect(appId).toBeDefined();
    let named: Record<string, unknown> | undefined;
    for (let i = 0; named === undefined && i < 30; i++) {
      await http(url, { ...init, body: `{"description":"named ${i}"}` });
      await new Promise((resolve) => setTimeout(resolve, 500));
      named = engineLines(engine, 'Creating new todo').find((l) => l.workerId !== undefined);
    }
    expect(named).toMatchObject({ level: 30, workerId: appId, function: 'api::post::todo' });
    expect(named?.trace_id).toMatch(/^[0-9a-f]{32}$/);

    const bad = await http(url, { ...init, body: '{}' });
    expect(bad.status).toBe(400);
    await engine.stdout.waitFor((l) => l.includes('"Description is required"'), 15_000, 'the warning');
    expect(engineLines(engine, 'Description is required')[0]).toMatchObject({ level: 40, function: 'api::post::todo' });
  });

  it('Enqueue without a provider: the app catches enqueue_error, the job never runs inline', async () => {
    const res = await http(`${engine.httpUrl}/queue/enqueue-safe`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"job":1}' });
    expect(res.status).toBe(503);
    expect(res.json()).toEqual({ error: 'Failed to enqueue job', code: 'enqueue_error' });
    await engine.stdout.waitFor((l) => l.includes('"Queue rejected job"'), 15_000, 'the app\'s error line');
    expect(engineLines(engine, 'Queue rejected job')[0]).toMatchObject({ level: 50, function: 'api::post::queue/enqueue-safe' });
    // Uncaught, the failure is the handler's error.
    const raw = await http(`${engine.httpUrl}/queue/enqueue`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"job":2}' });
    expect(raw.status).toBe(500);
    expect(engineLines(engine, 'Processing job')).toEqual([]);
  });

  it('Enqueue with a provider: the provider gets iii\'s input, the app answers the receipt, the job does not run inline', async () => {
    others.push(startApp('queue-provider.mjs', engine));
    const url = `${engine.httpUrl}/queue/enqueue`;
    const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"job":3}' };
    const res = await waitForStatus(url, (s) => s === 202, init, WORKER_READY_MS);
    const { receiptId } = res.json<{ receiptId: string }>();
    expect(receiptId).toMatch(/^[0-9a-f-]{36}$/);
    await engine.stdout.waitFor((l) => l.includes('"queued"') && l.includes(receiptId), 15_000, 'the provider\'s log line');
    const queued = engineLines(engine, 'queued').find((l) => JSON.stringify(l).includes(receiptId));
    expect(queued?.data).toEqual({
      queue: 'default',
      function_id: 'queue::process-job',
      messageReceiptId: receiptId,
      keys: ['baggage', 'data', 'function_id', 'messageReceiptId', 'queue', 'traceparent'],
    });
    expect(engineLines(engine, 'Processing job')).toEqual([]);
  });

  it('iii-sdk 0.9\'s telemetry socket on the worker port is telemetry: not a worker, not malformed, its logs printed', async () => {
    const workersBefore = await metric(engine, 'switchyard_workers_connected');
    const legacy = startApp('sdk-0-9-logger.mjs', engine);
    others.push(legacy);
    await waitForEveryProcess(`${engine.httpUrl}/v09/log`, 2, (s) => s === 200, WORKER_READY_MS);
    await engine.stdout.waitFor((l) => l.includes('"hello from 0.9"'), 15_000, 'the 0.9 worker\'s log line');
    expect(engineLines(engine, 'hello from 0.9')[0]).toMatchObject({ level: 30, service: 'legacy-09', function: 'legacy09::logger', data: { n: 9 } });
    // One worker more, not two; its telemetry counted as such; nothing logged as malformed.
    expect(await metric(engine, 'switchyard_workers_connected')).toBe(workersBefore + 1);
    expect(await metric(engine, 'switchyard_telemetry_frames_total', 'kind="logs"')).toBeGreaterThan(0);
    expect(engine.stdout.lines.filter((l) => l.includes('malformed worker frame ignored'))).toEqual([]);
  });
});
