// Readiness means "this engine can serve its routes" (docs/operations.md#readiness): a Redis outage
// alone leaves /readyz at 200 on every node while it shows in /healthz, in switchyard_bus_in_sync and
// in one log line per node; a real redis-server is stopped and started again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForEveryProcess } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';
import type { RedisServer } from '../support/redis.js';
import { startRedisServer } from '../support/redis.js';

const HEARTBEAT_MS = 200;
const LEASE_MS = 1000;

describe('readiness during a Redis outage (two nodes, a worker on node B)', () => {
  let redis: RedisServer;
  let nodeA: EngineHandle;
  let nodeB: EngineHandle;
  let worker: RawWorker | undefined;

  beforeAll(async () => {
    redis = await startRedisServer();
    const cluster = {
      redis_url: redis.url,
      secret: 'readiness-secret',
      name: `r${Math.random().toString(36).slice(2, 8)}`,
      advertise_host: '127.0.0.1',
      heartbeat_ms: HEARTBEAT_MS,
      lease_ms: LEASE_MS,
    };
    nodeA = await startEngine({ cluster: { ...cluster, processes: 2, node_id: 'node-a' }, logLevel: 'info' });
    nodeB = await startEngine({ cluster: { ...cluster, processes: 1, node_id: 'node-b' }, logLevel: 'info' });
    worker = await RawWorker.connect(nodeB.workerUrl);
    worker.route('ready::echo', 'GET', '/ready-check/:n');
    worker.serve('ready::echo', (req: { path_params: { n: string } }) => ({ status_code: 200, body: { n: req.path_params.n } }));
    await worker.sync();
    await waitForEveryProcess(`${nodeA.httpUrl}/ready-check/0`, 2, (s) => s === 200, 20_000);
  }, 120_000);
  afterAll(async () => {
    await worker?.close();
    await nodeB?.stop();
    await nodeA?.stop();
    await redis?.stop();
  });

  const health = async (node: EngineHandle) => (await http(`${node.adminUrl}/healthz`)).json<{ status: string; ready: boolean; mode: string; bus: string }>();
  const busMetric = async (node: EngineHandle) => /^switchyard_bus_in_sync (\d)/m.exec((await http(`${node.adminUrl}/metrics`)).text)?.[1];

  it('stays ready while Redis is down; the outage shows in /healthz, the metric and the log', async () => {
    for (const node of [nodeA, nodeB]) {
      expect((await http(`${node.adminUrl}/readyz`)).status).toBe(200);
      expect(await health(node)).toMatchObject({ status: 'ok', ready: true, mode: 'redis', bus: 'in_sync' });
      expect(await busMetric(node)).toBe('1');
    }

    await redis.stop();
    for (const node of [nodeA, nodeB]) {
      await waitUntil(async () => (await health(node)).bus === 'out_of_sync', 20_000, 'healthz to show the bus out of sync');
      expect(await busMetric(node)).toBe('0');
      await node.stdout.waitFor((line) => line.includes('cluster bus out of sync'), 10_000, 'the out-of-sync log line');
    }
    // Three leases without Redis: readiness never drops, and node A still forwards to node B's worker.
    const until = Date.now() + 3 * LEASE_MS;
    let n = 0;
    while (Date.now() < until) {
      for (const node of [nodeA, nodeB]) {
        const ready = await http(`${node.adminUrl}/readyz`);
        expect(ready.status).toBe(200);
        expect(ready.json()).toMatchObject({ status: 'ready', bus: 'out_of_sync' });
      }
      const res = await http(`${nodeA.httpUrl}/ready-check/${++n}`, { headers: { connection: 'close' } });
      expect(res.status).toBe(200);
      expect(res.json()).toEqual({ n: String(n) });
    }
    expect((await health(nodeA)).ready).toBe(true);

    await redis.restart();
    for (const node of [nodeA, nodeB]) {
      await waitUntil(async () => (await health(node)).bus === 'in_sync', 20_000, 'healthz to show the bus in sync again');
      expect(await busMetric(node)).toBe('1');
      await node.stdout.waitFor((line) => line.includes('cluster bus in sync again'), 10_000, 'the in-sync log line');
      expect((await http(`${node.adminUrl}/readyz`)).status).toBe(200);
    }
    expect((await http(`${nodeA.httpUrl}/ready-check/last`, { headers: { connection: 'close' } })).status).toBe(200);
  });
});
