// A node killed without a goodbye leaves the table of EVERY surviving process, not only the first to
// notice. Until 2026-11-26 the process whose sweep found the dead peer's lease lapsed first also took
// it out of the shared liveness set in Redis, so the other processes' sweeps never saw it again and
// kept its routes (503 after the reconnect grace) for as long as they ran: found by the attack
// script's bus replay (issue 23), whose two surviving nodes of two children each kept a dead node's
// route for the whole run.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForStatus } from '../support/http.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';
import type { RedisServer } from '../support/redis.js';
import { startRedisServer } from '../support/redis.js';

const HEARTBEAT_MS = 200;
const LEASE_MS = 1000;

describe('Redis bus: a dead node leaves every surviving process', () => {
  let redis: RedisServer;
  let survivors: EngineHandle[] = [];
  let doomed: EngineHandle | undefined;
  const sockets: RawWorker[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    const cluster = { redis_url: redis.url, secret: 'expiry-secret', name: `e${Math.random().toString(36).slice(2, 8)}`, advertise_host: '127.0.0.1', heartbeat_ms: HEARTBEAT_MS, lease_ms: LEASE_MS };
    // Two survivors of two children each: four processes sweep the liveness set.
    survivors = [await startEngine({ cluster: { ...cluster, processes: 2, node_id: 'node-a' } }), await startEngine({ cluster: { ...cluster, processes: 2, node_id: 'node-b' } })];
    doomed = await startEngine({ cluster: { ...cluster, processes: 1, node_id: 'node-c' } });
  });
  afterAll(async () => {
    await Promise.all(sockets.map((s) => s.close()));
    for (const node of survivors) await node.stop();
    await doomed?.stop();
    await redis?.stop();
  });

  it('every child of every surviving node drops the dead node\'s route', async () => {
    const w = await RawWorker.connect((doomed as EngineHandle).workerUrl);
    sockets.push(w);
    w.route('doomed::fn', 'GET', '/doomed');
    w.serve('doomed::fn', () => ({ status_code: 200, body: 'alive' }));
    await w.sync();
    for (const node of survivors) await waitForStatus(`${node.httpUrl}/doomed`, (s) => s === 200);
    await (doomed as EngineHandle).killAll();
    doomed = undefined;
    // The lease and a few sweeps, then every request (node:cluster spreads them over both children) is a 404.
    await new Promise((r) => setTimeout(r, LEASE_MS * 4));
    const statuses: number[] = [];
    for (const node of survivors) for (let i = 0; i < 4; i++) statuses.push((await http(`${node.httpUrl}/doomed`)).status);
    expect(statuses).toEqual(Array.from({ length: 8 }, () => 404));
  }, 60_000);
});
