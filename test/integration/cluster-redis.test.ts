import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForStatus } from '../support/http.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';
import type { RedisServer } from '../support/redis.js';
import { startRedisServer } from '../support/redis.js';

const HEARTBEAT_MS = 200;
const LEASE_MS = 1000;

describe('distributed mode: two nodes sharing one Redis', () => {
  let redis: RedisServer;
  let nodeA: EngineHandle;
  let nodeB: EngineHandle;
  const sockets: RawWorker[] = [];

  const cluster = (nodeId: string) => ({
    processes: 1,
    redis_url: redis.url,
    secret: 'test-secret',
    name: `t${Math.random().toString(36).slice(2, 8)}`,
    node_id: nodeId,
    advertise_host: '127.0.0.1',
    heartbeat_ms: HEARTBEAT_MS,
    lease_ms: LEASE_MS,
  });

  const workerOn = async (engine: EngineHandle, functionId: string, path: string): Promise<RawWorker> => {
    const w = await RawWorker.connect(engine.workerUrl);
    sockets.push(w);
    w.route(functionId, 'GET', path);
    w.serve(functionId, (req: { path: string }) => ({ status_code: 200, body: { fn: functionId, path: req.path } }));
    await w.sync();
    return w;
  };

  beforeAll(async () => {
    redis = await startRedisServer();
    const shared = cluster('node-a');
    nodeA = await startEngine({ cluster: shared });
    nodeB = await startEngine({ cluster: { ...shared, node_id: 'node-b' } });
  });
  afterAll(async () => {
    await Promise.all(sockets.map((s) => s.close()));
    await nodeB?.stop();
    await nodeA?.stop();
    await redis?.stop();
  });

  it('a worker reattaching on node B retires its previous connection on node A', async () => {
    const old = await workerOn(nodeA, 'rr::who', '/rr/who');
    const registered = await old.ofType('workerregistered');
    await waitForStatus(`${nodeB.httpUrl}/rr/who`, (s) => s === 200);
    const fresh = await RawWorker.connect(nodeB.workerUrl);
    sockets.push(fresh);
    fresh.send({ type: 'reattach', previous_worker_id: registered.worker_id, reattach_token: registered.reattach_token });
    fresh.route('rr::who', 'GET', '/rr/who');
    fresh.serve('rr::who', () => ({ status_code: 200, body: 'fresh' }));
    const closed = await Promise.race([old.closed, new Promise((r) => setTimeout(() => r('still open'), 5000))]);
    expect(closed).not.toBe('still open');
    await nodeA.stdout.waitFor((l) => l.includes('retired a connection whose worker reattached on another peer'));
    for (const node of [nodeA, nodeB]) {
      const res = await waitForStatus(`${node.httpUrl}/rr/who`, (s) => s === 200);
      expect(res.text).toBe('"fresh"');
    }
  });

  it('serves a worker connected to node A through node B', async () => {
    await workerOn(nodeA, 'ra::hello', '/ra/hello');
    const res = await waitForStatus(`${nodeB.httpUrl}/ra/hello`, (s) => s === 200);
    expect(res.json()).toEqual({ fn: 'ra::hello', path: '/ra/hello' });
    // Both nodes list the worker with the node it is connected to (node A's own view included).
    for (const node of [nodeA, nodeB]) {
      const workers = (await http(`${node.adminUrl}/workers`)).json<{ functions: string[]; node?: string }[]>();
      expect(workers.find((w) => w.functions.includes('ra::hello'))?.node).toBe('node-a');
    }
  });

  it('runs middleware and condition functions served on the other node', async () => {
    // The route's worker is on A; its condition and an onRequest middleware are served by a worker on B.
    const onB = await RawWorker.connect(nodeB.workerUrl);
    sockets.push(onB);
    onB.send({ type: 'registerfunction', id: 'rb::allow' });
    onB.send({ type: 'registerfunction', id: 'rb::tag' });
    onB.send({
      type: 'registertrigger',
      id: 'rb-mw',
      trigger_type: 'http_middleware',
      function_id: 'rb::tag',
      config: { phase: 'onRequest', scope: { path: '/ra/guarded' } },
    });
    onB.serve('rb::allow', (req: { headers: Record<string, string> }) => req.headers['x-allow'] === 'yes');
    onB.serve('rb::tag', () => ({ action: 'continue', context: { taggedBy: 'node-b' } }));
    await onB.sync();
    const onA = await RawWorker.connect(nodeA.workerUrl);
    sockets.push(onA);
    onA.route('ra::guarded', 'GET', '/ra/guarded', { condition_function_id: 'rb::allow' });
    onA.serve('ra::guarded', (req: { context: unknown }) => ({ status_code: 200, body: req.context }));
    await onA.sync();
    const ok = await waitForStatus(`${nodeA.httpUrl}/ra/guarded`, (s) => s === 200, { headers: { 'x-allow': 'yes' } });
    expect(ok.json()).toEqual({ taggedBy: 'node-b' });
    const refused = await http(`${nodeA.httpUrl}/ra/guarded`, { headers: { 'x-allow': 'no' } });
    expect(refused.status).toBe(422);
  });

  it('keeps every live route through a Redis restart', async () => {
    await workerOn(nodeA, 'ra::steady', '/ra/steady');
    await waitForStatus(`${nodeB.httpUrl}/ra/steady`, (s) => s === 200);
    await redis.kill();
    // Redis is down for longer than a lease: nobody may be purged for that.
    const outageEnds = Date.now() + LEASE_MS * 2;
    while (Date.now() < outageEnds) {
      expect((await http(`${nodeB.httpUrl}/ra/steady`)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 100));
    }
    await redis.restart();
    // After the restart (empty Redis) the peers republish; the route never goes away.
    const settled = Date.now() + LEASE_MS * 3;
    while (Date.now() < settled) {
      expect((await http(`${nodeB.httpUrl}/ra/steady`)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  it('makes registrations done during a Redis outage visible once Redis is back', async () => {
    await redis.stop();
    await workerOn(nodeA, 'ra::late', '/ra/late');
    expect((await http(`${nodeB.httpUrl}/ra/late`)).status).toBe(404);
    await redis.restart();
    const res = await waitForStatus(`${nodeB.httpUrl}/ra/late`, (s) => s === 200, {}, 10_000);
    expect(res.json().fn).toBe('ra::late');
  });

  it('purges the routes of a node killed without goodbye within the lease', async () => {
    await workerOn(nodeA, 'ra::doomed', '/ra/doomed');
    await waitForStatus(`${nodeB.httpUrl}/ra/doomed`, (s) => s === 200);
    const killedAt = Date.now();
    await nodeA.killAll();
    await waitForStatus(`${nodeB.httpUrl}/ra/doomed`, (s) => s === 404, {}, LEASE_MS * 5);
    const purgeMs = Date.now() - killedAt;
    // The lease, plus a heartbeat for the sweep to notice, plus slack for a loaded machine.
    expect(purgeMs).toBeLessThan(LEASE_MS + HEARTBEAT_MS * 2 + 1500);
  });
});
