// Issue 23, attack 3: signed Redis bus messages once carried no time or sequence, so a captured
// snapshot and heartbeat of a node that died, republished every 0.5 s, brought it back into every
// node's table (its routes answered 503, other workers could not take its paths) for as long as the
// replay ran. Two nodes in Redis mode; the attacker can read and write Redis but has no secret.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';
import type { RedisServer } from '../support/redis.js';
import { startRedisServer } from '../support/redis.js';

const LEASE_MS = 1000;

describe('bus replay: a dead node cannot be brought back by replaying its messages (issue 23)', () => {
  let redis: RedisServer;
  let nodeA: EngineHandle;
  let nodeB: EngineHandle | undefined;
  let spy: Redis;
  const captured: string[] = [];
  const cluster = { processes: 1, secret: 'replay-secret', name: `r${Math.random().toString(36).slice(2, 8)}`, advertise_host: '127.0.0.1', heartbeat_ms: 200, lease_ms: LEASE_MS };

  beforeAll(async () => {
    redis = await startRedisServer();
    spy = new Redis(redis.url, { lazyConnect: true });
    await spy.connect();
    await spy.subscribe(`${cluster.name}:bus`);
    spy.on('message', (_channel: string, text: string) => captured.push(text));
    nodeA = await startEngine({ cluster: { ...cluster, redis_url: redis.url, node_id: 'node-a' }, logLevel: 'info' });
    nodeB = await startEngine({ cluster: { ...cluster, redis_url: redis.url, node_id: 'node-b' }, logLevel: 'info' });
  });
  afterAll(async () => {
    spy?.disconnect();
    await nodeB?.stop();
    await nodeA?.stop();
    await redis?.stop();
  });

  it('refuses the replayed snapshot and deltas, counts them, and lets another worker take the path', async () => {
    const victim = await RawWorker.connect((nodeB as EngineHandle).workerUrl);
    victim.route('victim::fn', 'GET', '/victim');
    victim.serve('victim::fn', () => ({ status_code: 200, body: { from: 'b' } }));
    await victim.sync();
    await waitUntil(async () => (await http(`${nodeA.httpUrl}/victim`)).status === 200, 20_000, 'node A to serve /victim through node B');
    // What the attacker captured: everything node B published, its snapshot and the delta with the route
    // (nodes no longer announce their versions; heartbeats of earlier builds are sealed the same way).
    await waitUntil(() => captured.some((t) => t.includes('"delta"') && t.includes('"node-b/') && t.includes('victim::fn')), 10_000, "node B's delta with the route captured");
    const fromB = captured.filter((t) => t.includes('"node-b/'));
    expect(fromB.some((t) => t.includes('"snapshot"'))).toBe(true);

    await (nodeB as EngineHandle).killAll(); // dies without a goodbye
    nodeB = undefined;
    await waitUntil(async () => (await http(`${nodeA.httpUrl}/victim`)).status === 404, 20_000, 'node A to drop node B after its lease');

    let replaying = true;
    const replay = (async () => {
      while (replaying) {
        for (const text of fromB) await redis.command('PUBLISH', `${cluster.name}:bus`, text);
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    })();
    try {
      // Three leases of replay: node B must never be back.
      const until = Date.now() + 3 * LEASE_MS + 1000;
      while (Date.now() < until) {
        expect((await http(`${nodeA.httpUrl}/victim`)).status).toBe(404);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const taker = await RawWorker.connect(nodeA.workerUrl);
      taker.route('taker::fn', 'GET', '/victim');
      taker.serve('taker::fn', () => ({ status_code: 200, body: { from: 'a' } }));
      await taker.sync();
      await waitUntil(async () => (await http(`${nodeA.httpUrl}/victim`)).status === 200, 10_000, 'another worker serving /victim');
      expect((await http(`${nodeA.httpUrl}/victim`)).json()).toEqual({ from: 'a' });
      await taker.close();
    } finally {
      replaying = false;
      await replay;
    }
    const metrics = (await http(`${nodeA.adminUrl}/metrics`)).text;
    expect(metrics).toMatch(/switchyard_bus_refused_total\{reason="replayed"\} [1-9]/);
    await victim.close().catch(() => undefined);
  });
});
