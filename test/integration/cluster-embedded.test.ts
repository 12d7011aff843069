import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForEveryProcess, waitForStatus } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';

/** pids of the children that logged an access line for `requestId`. */
function servedBy(engine: EngineHandle, requestIds: Set<string>): Map<number, number> {
  const byPid = new Map<number, number>();
  for (const line of engine.stdout.json()) {
    if (line.msg === 'request' && requestIds.has(String(line.requestId))) {
      const pid = Number(line.pid);
      byPid.set(pid, (byPid.get(pid) ?? 0) + 1);
    }
  }
  return byPid;
}

describe('embedded cluster: processes: 2', () => {
  let engine: EngineHandle;
  let worker: RawWorker;

  beforeAll(async () => {
    engine = await startEngine({ cluster: { processes: 2 } });
    worker = await RawWorker.connect(engine.workerUrl);
    worker.route('emb::hello', 'GET', '/emb/:name');
    worker.serve('emb::hello', (req: { path_params: { name: string }; request_id: string }) => ({
      status_code: 200,
      body: { name: req.path_params.name, requestId: req.request_id },
    }));
    // Answers large and small enough to cross both ways between the children (as the worker's frame, or as a value).
    worker.route('emb::big', 'GET', '/emb-big/:kib');
    worker.serve('emb::big', (req: { path_params: { kib: string } }) => ({
      status_code: 200,
      headers: { 'x-kib': req.path_params.kib },
      body: { rows: Array.from({ length: Number(req.path_params.kib) * 16 }, (_, i) => ({ i, s: 'é✓'.repeat(8) })) },
    }));
    await worker.sync();
  });
  afterAll(async () => {
    await worker?.close();
    await engine?.stop();
  });

  it('serves a worker connected to one child from both children, over fresh connections', async () => {
    // Wait until the route is in both children's tables: a run of fresh connections all answered.
    await waitForEveryProcess(`${engine.httpUrl}/emb/probe`, 2);
    const ids = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const id = `emb-${i}`;
      ids.add(id);
      const res = await http(`${engine.httpUrl}/emb/n${i}`, { headers: { connection: 'close', 'x-request-id': id } });
      expect(res.status).toBe(200);
      expect(res.json()).toEqual({ name: `n${i}`, requestId: id });
    }
    // Both children write to the shared pipe on their own schedule: wait until all 20 lines are in.
    const counted = () => [...servedBy(engine, ids).values()].reduce((a, b) => a + b, 0);
    await engine.stdout.waitFor(() => counted() >= 20, 10_000, '20 access lines');
    const pids = servedBy(engine, ids);
    expect([...pids.values()].reduce((a, b) => a + b, 0)).toBe(20);
    expect(pids.size).toBe(2);
  });

  it('answers large and small bodies alike from the child that owns the worker and from the other', async () => {
    await waitForEveryProcess(`${engine.httpUrl}/emb-big/1`, 2);
    for (const kib of [0, 1, 4, 64]) {
      const expected = { rows: Array.from({ length: kib * 16 }, (_, i) => ({ i, s: 'é✓'.repeat(8) })) };
      // Fresh connections land on both children: at least one of every four crosses to the owner.
      for (let i = 0; i < 4; i++) {
        const res = await http(`${engine.httpUrl}/emb-big/${kib}`, { headers: { connection: 'close' } });
        expect(res.status).toBe(200);
        expect(res.headers['x-kib']).toBe(String(kib));
        expect(res.json()).toEqual(expected);
      }
    }
  });

  it('refuses a second binding of a route to another function, and the first keeps the route on every process', async () => {
    // Two workers, connected one after the other (the primary deals connections round-robin, so
    // they usually sit on different children), bind the same route to different functions.
    const first = await RawWorker.connect(engine.workerUrl);
    const second = await RawWorker.connect(engine.workerUrl);
    try {
      first.route('emb::v1', 'GET', '/emb-bind');
      first.serve('emb::v1', () => ({ status_code: 200, body: 'v1' }));
      await first.sync();
      await waitForStatus(`${engine.httpUrl}/emb-bind`, (s) => s === 200, { headers: { connection: 'close' } });
      second.serve('emb::v2', () => ({ status_code: 200, body: 'v2' }));
      const triggerId = second.route('emb::v2', 'GET', '/emb-bind');
      const refusal = await second.next((f) => f.type === 'triggerregistrationresult' && f.id === triggerId, 10_000);
      expect(refusal.error.code).toBe('trigger_registration_failed');
      const fresh = async () => (await http(`${engine.httpUrl}/emb-bind`, { headers: { connection: 'close' } })).text;
      expect(await Promise.all(Array.from({ length: 6 }, fresh))).toEqual(Array(6).fill('"v1"'));
    } finally {
      await second.close();
      await first.close();
    }
  });

  it('reports both children ready on /readyz', async () => {
    const res = await http(`${engine.adminUrl}/readyz`);
    expect(res.status).toBe(200);
    const body = res.json();
    expect(body.children).toHaveLength(2);
    expect(body.children.every((c: { ready: boolean }) => c.ready)).toBe(true);
  });

  it('starts the children with cluster.child_node_args (default: the V8 heap sizing)', async () => {
    const body = (await http(`${engine.adminUrl}/readyz`)).json();
    for (const child of body.children as { pid: number }[]) {
      const argv = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
      expect(argv).toEqual(expect.arrayContaining(['--heap-growing-percent=50', '--min-semi-space-size=16', '--max-semi-space-size=16']));
    }
  });

  it('starts the children with one malloc arena (MALLOC_ARENA_MAX=1) when the engine environment sets none', async () => {
    expect(process.env.MALLOC_ARENA_MAX).toBeUndefined(); // the harness passes the test's environment on
    const body = (await http(`${engine.adminUrl}/readyz`)).json();
    for (const child of body.children as { pid: number }[]) {
      const environ = readFileSync(`/proc/${child.pid}/environ`, 'utf8').split('\0');
      expect(environ).toContain('MALLOC_ARENA_MAX=1');
    }
  });

  it('restarts a crashed child while the child owning the worker keeps serving', async () => {
    // Kill the child that does NOT own the worker socket: the route must stay servable throughout.
    type Child = { pid: number; workers: number };
    let children: Child[] = [];
    // Earlier tests' workers may still be counted for a moment: wait until only ours is left.
    const settled = (list: Child[]) => list.reduce((sum, c) => sum + c.workers, 0) === 1;
    await waitUntil(async () => settled((children = (await http(`${engine.adminUrl}/readyz`)).json().children as Child[])), 5000, 'readyz to count only our worker');
    const victim = children.find((c) => c.workers === 0)?.pid;
    expect(victim).toBeGreaterThan(0);
    process.kill(victim as number, 'SIGKILL');
    await engine.stdout.waitFor((l) => l.includes('child exited; restarting'));
    const res = await waitForStatus(`${engine.httpUrl}/emb/after`, (s) => s === 200, { headers: { connection: 'close' } });
    expect(res.json().name).toBe('after');
    // Back to two ready children.
    let body: { status: string; children: { ready: boolean }[] } = { status: '', children: [] };
    await waitUntil(
      async () => {
        body = (await http(`${engine.adminUrl}/readyz`)).json();
        return body.children.length === 2 && body.children.every((c) => c.ready);
      },
      10_000,
      'two ready children again',
    );
    expect(body.status).toBe('ready');
  });
});
