// Issue 23, attacks 2 and 6 with raw frames, on a two-process engine: oversized ids and registrations
// from a restricted tenant at its limits (once they took a child to 2.87 GB and killed it), and a
// worker registering an `engine::` id (once accepted, and a route bound to it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../support/http.js';
import { logLines, waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { childPids, isRunning, rssMb } from '../support/proc.js';
import { RawWorker } from '../support/raw-worker.js';
import { freePort } from '../support/redis.js';

const MiB = 1024 * 1024;

describe('oversized registrations and reserved ids (issue 23)', () => {
  let engine: EngineHandle;
  let tenantUrl: string;
  /** An rbac listener with the default max_listener_registration_bytes (1 MiB per process). */
  let budgetUrl: string;
  let trusted: RawWorker;
  const tenants: RawWorker[] = [];

  /** The ids the cluster's table shows (engine::functions::list, from the main listener). */
  async function listedIds(): Promise<string[]> {
    const invocationId = `list-${Math.random()}`;
    trusted.send({ type: 'invokefunction', invocation_id: invocationId, function_id: 'engine::functions::list', data: {} });
    const result = await trusted.next((f) => f.type === 'invocationresult' && f.invocation_id === invocationId, 10_000);
    return (result.result as { functions: { function_id: string }[] }).functions.map((f) => f.function_id);
  }

  /** Frames are handled in order: once a ping sent after them is answered, they were handled (4 MB frames take a while on a loaded machine). */
  const synced = async (worker: RawWorker): Promise<void> => {
    worker.send({ type: 'ping' });
    await worker.ofType('pong', 60_000);
  };

  const tenant = async (): Promise<RawWorker> => {
    const worker = await RawWorker.connect(tenantUrl);
    tenants.push(worker);
    return worker;
  };

  beforeAll(async () => {
    const port = await freePort();
    const budgetPort = await freePort();
    tenantUrl = `ws://127.0.0.1:${port}`;
    budgetUrl = `ws://127.0.0.1:${budgetPort}`;
    engine = await startEngine({
      logLevel: 'info',
      cluster: { processes: 2 },
      modules: [
        // The per-connection and per-process bounds are tested here: this listener's own budget is the process's.
        { name: 'iii-worker-manager', config: { host: '127.0.0.1', port, max_registrations: 50, max_listener_registration_bytes: 16 * MiB, rbac: { expose_functions: ['match("big::*")'] } } },
        { name: 'iii-worker-manager', config: { host: '127.0.0.1', port: budgetPort, rbac: { expose_functions: [] } } },
      ],
    });
    trusted = await RawWorker.connect(engine.workerUrl);
  });
  afterAll(async () => {
    for (const worker of tenants) await worker.close().catch(() => undefined);
    await trusted?.close();
    await engine?.stop();
  });

  it('refuses ids over 1,024 characters before storing them; 4 MB ids leave every process up and small', async () => {
    const worker = await tenant();
    const pidsBefore = childPids((engine.child.pid as number));
    for (let i = 0; i < 8; i++) worker.send({ type: 'registerfunction', id: `big::${i}::${'x'.repeat(4 * MiB)}` });
    worker.send({ type: 'registerfunction', id: `big::ok::${'y'.repeat(1000)}` });
    worker.send({ type: 'registerfunction', id: `big::long::${'z'.repeat(1100)}` });
    await synced(worker);
    await waitUntil(async () => (await listedIds()).some((id) => id.startsWith('big::ok::')), 30_000, 'the 1,008-character id is listed');
    const ids = await listedIds();
    expect(ids.filter((id) => id.startsWith('big::') && id.length > 1024)).toEqual([]);
    for (const pid of [(engine.child.pid as number), ...pidsBefore]) {
      expect(isRunning(pid)).toBe(true);
      expect(rssMb(pid)).toBeLessThan(400);
    }
    expect(childPids((engine.child.pid as number)).sort()).toEqual(pidsBefore.sort());
  });

  it('bounds what one connection registers in bytes (8 MiB), counted in the limit metric', async () => {
    const worker = await tenant();
    const blob = 'm'.repeat(200_000);
    for (let i = 0; i < 45; i++) worker.send({ type: 'registerfunction', id: `big::meta-${i}`, metadata: { blob } });
    await synced(worker);
    await waitUntil(() => logLines(engine, (l) => String(l.msg).includes('8388608 bytes')).length > 0, 30_000, 'the connection bound is logged');
    await waitUntil(async () => (await listedIds()).filter((id) => id.startsWith('big::meta-')).length > 30, 30_000, 'the registrations under the bound are listed');
    const held = (await listedIds()).filter((id) => id.startsWith('big::meta-'));
    expect(held.length).toBeLessThan(45);
    const metrics = await http(`${engine.adminUrl}/metrics`);
    expect(metrics.text).toMatch(/switchyard_worker_limit_hits_total\{reason="registration_bytes"\} [1-9]/);
  });

  it('bounds what a restricted listener\'s workers register together in each process (max_listener_registration_bytes, 1 MiB by default with rbac)', async () => {
    // Every process holds every process's registrations: without this, a tenant's connections could
    // put 16 MiB per process into every process of the cluster (until 2026-11-26).
    const blob = 'r'.repeat(200_000);
    const workers: RawWorker[] = [];
    for (let c = 0; c < 8; c++) {
      const worker = await RawWorker.connect(budgetUrl);
      tenants.push(worker);
      workers.push(worker);
      for (let i = 0; i < 4; i++) worker.send({ type: 'registerfunction', id: `budget::${c}-${i}`, metadata: { blob } });
    }
    for (const worker of workers) await synced(worker);
    // 6.4 MB over two processes: at least 3.2 MB on one, where at most 5 of these fit in 1 MiB.
    await waitUntil(() => logLines(engine, (l) => String(l.msg).includes('max_listener_registration_bytes')).length > 0, 30_000, 'the listener budget is logged');
    const metrics = await http(`${engine.adminUrl}/metrics`);
    expect(metrics.text).toMatch(/switchyard_worker_limit_hits_total\{reason="listener_registration_bytes"\} [1-9]/);
    const held = (await listedIds()).filter((id) => id.startsWith('budget::'));
    expect(held.length).toBeLessThanOrEqual(10);
    expect(held.length).toBeGreaterThan(0);
    // Given back when they go: a new connection registers again.
    for (const worker of workers) await worker.close();
    const again = await RawWorker.connect(budgetUrl);
    tenants.push(again);
    again.send({ type: 'registerfunction', id: 'budget::again', metadata: { blob } });
    await synced(again);
    await waitUntil(async () => (await listedIds()).includes('budget::again'), 30_000, 'the registration after the others left is listed');
  });

  it('refuses a registration frame over 256 KiB (metadata, config)', async () => {
    const worker = await tenant();
    worker.send({ type: 'registerfunction', id: 'big::frame', metadata: { blob: 'f'.repeat(300 * 1024) } });
    worker.send({ type: 'registerfunction', id: 'big::frame-after' });
    await synced(worker);
    await waitUntil(async () => (await listedIds()).includes('big::frame-after'), 30_000, 'the small registration after it is listed');
    expect(await listedIds()).not.toContain('big::frame');
  });

  it('reserves engine:: ids: a worker cannot register one, nor bind a route to it', async () => {
    for (const worker of [trusted, await tenant()]) {
      worker.route('engine::functions::list', 'GET', '/stolen/list');
      worker.route('engine::shadow', 'GET', '/stolen/shadow');
      worker.route('big::fine', 'GET', '/fine');
      await synced(worker);
    }
    await waitUntil(() => logLines(engine, (l) => l.msg === 'function registration refused: reserved id').length >= 4, 30_000, 'four reserved-id refusals logged');
    await trusted.next((f) => f.type === 'triggerregistrationresult' && f.function_id === 'engine::functions::list' && f.error?.code === 'FORBIDDEN', 10_000);
    const ids = await listedIds();
    expect(ids).not.toContain('engine::shadow');
    for (const path of ['/stolen/list', '/stolen/shadow']) {
      const res = await http(`${engine.httpUrl}${path}`);
      expect({ path, status: res.status }).toEqual({ path, status: 404 });
    }
  });
});
