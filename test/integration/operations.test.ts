import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForEveryProcess, waitForStatus } from '../support/http.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { waitUntil } from '../support/logs.js';
import { QUICK_GRACE_MS, startEngine, startWorker, WORKER_READY_MS } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';

/** The value of one Prometheus sample line, or undefined. */
function sample(metrics: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of metrics.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

describe('operations: metrics, admin views and logs on a 2-process engine', () => {
  let engine: EngineHandle;
  let worker: WorkerHandle;
  const REQUESTS = 12;

  beforeAll(async () => {
    engine = await startEngine({ cluster: { processes: 2 }, workers: { reconnect_grace_ms: QUICK_GRACE_MS } });
    worker = startWorker('http-worker', engine.workerUrl, { WORKER_NAME: 'ops-worker' });
    // Both children must hold the worker's routes: two fresh connections could land on the same child
    // (CI once saw /echo answer 404 from the child that had not yet heard of them).
    await waitForEveryProcess(`${engine.httpUrl}/ready`, 2, (s) => s === 200, WORKER_READY_MS);
    for (let i = 0; i < REQUESTS; i++) {
      const res = await http(`${engine.httpUrl}/echo/${i}`, { headers: { connection: 'close', 'x-request-id': `ops-${i}` } });
      expect(res.status).toBe(200);
    }
    expect((await http(`${engine.httpUrl}/no/such/route`)).status).toBe(404);
  });
  afterAll(async () => {
    await worker?.stop();
    await engine?.stop();
  });

  it('serves Prometheus metrics aggregated over both children', async () => {
    const res = await http(`${engine.adminUrl}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toContain('text/plain');
    const text = res.text;
    expect(sample(text, 'switchyard_http_requests_total', { route: '/echo/:id', method: 'GET', status: '200' })).toBe(REQUESTS);
    // At least our one 404 (the start-up polling for /ready also counts while the worker registers).
    expect(sample(text, 'switchyard_http_requests_total', { route: '(unmatched)', status: '404' })).toBeGreaterThanOrEqual(1);
    const local = sample(text, 'switchyard_http_request_duration_seconds_count', { route: '/echo/:id', path: 'local' }) ?? 0;
    const forwarded = sample(text, 'switchyard_http_request_duration_seconds_count', { route: '/echo/:id', path: 'forwarded' }) ?? 0;
    expect(local + forwarded).toBe(REQUESTS);
    // Fresh connections are dealt round-robin to both children; the worker sits on one of them.
    expect(local).toBeGreaterThan(0);
    expect(forwarded).toBeGreaterThan(0);
    expect(sample(text, 'switchyard_workers_connected')).toBe(1);
    expect(sample(text, 'switchyard_routes')).toBeGreaterThan(10);
    expect(sample(text, 'switchyard_table_version')).toBeGreaterThan(0);
    expect(sample(text, 'switchyard_http_requests_in_flight')).toBe(0);
    expect(sample(text, 'switchyard_child_restarts_total')).toBe(0);
    expect(sample(text, 'switchyard_table_sync_lag_seconds_count')).toBeGreaterThan(0);
    for (const name of ['switchyard_forward_errors_total', 'switchyard_worker_reconnects_total', 'switchyard_middleware_duration_seconds', 'switchyard_functions_registered']) {
      expect(text).toContain(`# HELP ${name}`);
    }
  });

  it('lists the route table with the peers that serve each function', async () => {
    const res = await http(`${engine.adminUrl}/routes`);
    expect(res.status).toBe(200);
    const body = res.json();
    const echo = body.routes.find((r: { path: string; method: string }) => r.path === '/echo/:id' && r.method === 'GET');
    expect(echo).toMatchObject({ function_id: 'api::echo' });
    expect(echo.owners).toHaveLength(1);
    const guarded = body.routes.find((r: { path: string }) => r.path === '/guarded');
    expect(guarded.condition_function_id).toBe('cond::allow');
  });

  it('lists connected workers with name, runtime and functions', async () => {
    let workers: { name?: string }[] = [];
    await waitUntil(async () => (workers = (await http(`${engine.adminUrl}/workers`)).json()).some((w) => w.name === 'ops-worker'), 5000, 'the admin view to list ops-worker');
    const ops = workers.find((w) => w.name === 'ops-worker') as Record<string, unknown>;
    expect(ops).toMatchObject({ name: 'ops-worker', runtime: 'node', version: '0.22.1' });
    expect(ops.functions).toEqual(expect.arrayContaining(['api::echo', 'api::slow', 'cond::allow']));
    expect(typeof ops.peer).toBe('string');
  });

  it('logs one access line per request with route, status, duration, request id, worker and forwarded', async () => {
    // Children write their lines to the shared stdout pipe on their own schedule: wait for all of them.
    const accessLines = () => engine.stdout.json().filter((l) => l.msg === 'request' && String(l.requestId).startsWith('ops-'));
    await engine.stdout.waitFor(() => accessLines().length >= REQUESTS, 10_000, `${REQUESTS} access lines`);
    const lines = accessLines();
    expect(lines).toHaveLength(REQUESTS);
    for (const line of lines) {
      expect(line).toMatchObject({ method: 'GET', route: '/echo/:id', functionId: 'api::echo', status: 200 });
      expect(typeof line.durationMs).toBe('number');
      expect(typeof line.forwarded).toBe('boolean');
      expect(typeof line.worker).toBe('string');
    }
    expect(new Set(lines.map((l) => l.forwarded)).size).toBe(2);
    // The owning child logs each forwarded call with the same request id (one id on every hop).
    const forwardedIds = lines.filter((l) => l.forwarded === true).map((l) => l.requestId);
    await engine.stdout.waitFor((l) => l.includes('"forwarded call"') && l.includes(`"requestId":"${String(forwardedIds.at(-1))}"`));
    const hops = engine.stdout.json().filter((l) => l.msg === 'forwarded call').map((l) => l.requestId);
    expect(hops).toEqual(expect.arrayContaining(forwardedIds));
  });

  // After the checks that count workers: this one connects and drops a second worker.
  it('drops the request series of a route once its worker left (no growth with route churn)', async () => {
    const raw = await RawWorker.connect(engine.workerUrl);
    raw.route('ops::shortLived', 'GET', '/ops/short-lived/:n');
    raw.serve('ops::shortLived', () => ({ status_code: 200, body: { ok: true } }));
    await waitForStatus(`${engine.httpUrl}/ops/short-lived/0`, (s) => s === 200, { headers: { connection: 'close' } });
    // Fresh connections are dealt to both children, so both get series for the route (each one
    // serves it once its copy of the table has the registration: until then, retry).
    for (let i = 1; i <= 6; i++) await waitForStatus(`${engine.httpUrl}/ops/short-lived/${i}`, (s) => s === 200, { headers: { connection: 'close' } });
    const metrics = async (): Promise<string> => (await http(`${engine.adminUrl}/metrics`)).text;
    const before = await metrics();
    expect(sample(before, 'switchyard_http_requests_total', { route: '/ops/short-lived/:n', method: 'GET', status: '200' })).toBe(7);
    expect(sample(before, 'switchyard_http_request_duration_seconds_count', { route: '/ops/short-lived/:n' })).toBeGreaterThanOrEqual(1);

    await raw.close();
    await waitForStatus(`${engine.httpUrl}/ops/short-lived/9`, (s) => s === 404, { headers: { connection: 'close' } });
    let after = '';
    await waitUntil(async () => !(after = await metrics()).includes('route="/ops/short-lived/:n"'), 5000, 'the route\'s series to be dropped');
    expect(after.split('\n').filter((line) => line.includes('route="/ops/short-lived/:n"'))).toEqual([]);
    // Routes still in the table keep their series.
    expect(sample(after, 'switchyard_http_requests_total', { route: '/echo/:id', method: 'GET', status: '200' })).toBe(REQUESTS);
  });

  it('logs lifecycle lines for workers and peers', () => {
    const messages = new Set(engine.stdout.json().map((l) => l.msg));
    for (const msg of ['worker connected', 'worker registered its metadata', 'peer joined', 'child readiness', 'switchyard ready']) {
      expect(messages).toContain(msg);
    }
  });
});
