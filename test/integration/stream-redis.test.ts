import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForStatus } from '../support/http.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { WORKER_READY_MS, startEngine, startWorker } from '../support/processes.js';
import type { RedisServer } from '../support/redis.js';
import { freePort, startRedisServer } from '../support/redis.js';
import { RawStreamClient } from '../support/stream-client.js';

const json = { 'content-type': 'application/json' };

/**
 * iii-stream on two nodes sharing one Redis (distributed mode: the items live in the cluster's
 * Redis, changes travel on Redis pub/sub). The todo app of iii's example shape runs on node A; a
 * client on node B sees its writes; node A is then killed without a goodbye, and node B carries on
 * with the same items.
 */
describe('iii-stream on two Redis-mode nodes', () => {
  let redis: RedisServer;
  let nodeA: EngineHandle;
  let nodeB: EngineHandle;
  let streamB: string;
  const workers: WorkerHandle[] = [];
  const clients: RawStreamClient[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    const [portA, portB] = [await freePort(), await freePort()];
    streamB = `ws://127.0.0.1:${portB}/`;
    const cluster = {
      processes: 1,
      redis_url: redis.url,
      secret: 'test-secret',
      name: `s${Math.random().toString(36).slice(2, 8)}`,
      advertise_host: '127.0.0.1',
      heartbeat_ms: 200,
      lease_ms: 1000,
    };
    const stream = (port: number) => [{ name: 'iii-stream', config: { host: '127.0.0.1', port, auth_function: 'todo::auth' } }];
    nodeA = await startEngine({ cluster: { ...cluster, node_id: 'node-a' }, modules: stream(portA), readyTimeoutMs: 60_000 });
    nodeB = await startEngine({ cluster: { ...cluster, node_id: 'node-b' }, modules: stream(portB), readyTimeoutMs: 60_000 });
    workers.push(startWorker('stream-app-worker', nodeA.workerUrl, { WORKER_NAME: 'app-on-a' }));
    await waitForStatus(`${nodeA.httpUrl}/todo-ready`, (s) => s === 200, {}, WORKER_READY_MS);
    await waitForStatus(`${nodeB.httpUrl}/todo-ready`, (s) => s === 200, {}, WORKER_READY_MS);
  }, 180_000);
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    for (const w of workers) await w.stop();
    await nodeB?.stop();
    await nodeA?.killAll();
    await redis?.stop();
  }, 60_000);

  it('a client on node B sees, in order, the writes made on node A, and reads agree on both nodes', async () => {
    const client = await RawStreamClient.connect(`${streamB}?user=bea`);
    clients.push(client);
    client.join('b-1', 'todo', 'inbox');
    expect(await client.synced('inbox')).toEqual([]);
    for (const id of ['r-1', 'r-2']) {
      expect((await http(`${nodeA.httpUrl}/todo`, { method: 'POST', body: JSON.stringify({ id, description: id }), headers: json })).status).toBe(201);
    }
    expect((await http(`${nodeA.httpUrl}/todo/r-1/complete`, { method: 'POST' })).status).toBe(200);
    expect((await http(`${nodeA.httpUrl}/todo/r-2`, { method: 'DELETE' })).status).toBe(200);
    await client.next((f) => f.id === 'r-2' && f.event.type === 'delete', 15_000, 'delete of r-2 on node B');
    expect(client.frames.filter((f) => f.event.type !== 'sync').map((f) => `${f.id}:${f.event.type}`)).toEqual(['r-1:create', 'r-2:create', 'r-1:update', 'r-2:delete']);
    // Through node B's HTTP (its route is forwarded to the worker on A): the same items.
    const onB = (await http(`${nodeB.httpUrl}/todo`)).json<{ id: string; completedAt: string | null }[]>();
    expect(onB.map((t) => t.id)).toEqual(['r-1']);
    expect(onB[0]?.completedAt).toEqual(expect.any(String));
    await http(`${nodeA.httpUrl}/todo-ping`, { method: 'POST', body: JSON.stringify({ from: 'a' }), headers: json });
    expect(await client.next((f) => f.event.type === 'event')).toMatchObject({ event: { type: 'event', event: { type: 'ping', data: { from: 'a' } } } });
  }, 90_000);

  it('after node A is killed, node B serves the same items and its clients keep hearing changes', async () => {
    const client = await RawStreamClient.connect(streamB);
    clients.push(client);
    client.join('b-2', 'todo', 'inbox');
    await client.synced('inbox');
    await http(`${nodeA.httpUrl}/todo`, { method: 'POST', body: JSON.stringify({ id: 'k-1', description: 'before the kill' }), headers: json });
    await client.next((f) => f.id === 'k-1');

    await nodeA.killAll();
    await workers[0]?.stop();
    workers.splice(0, 1);
    workers.push(startWorker('stream-app-worker', nodeB.workerUrl, { WORKER_NAME: 'app-on-b' }));
    // Node A's routes leave with its lease; the worker now on B serves them again.
    await waitForStatus(`${nodeB.httpUrl}/todo-ready`, (s) => s === 200, {}, WORKER_READY_MS);
    await waitForStatus(`${nodeB.httpUrl}/todo/k-1`, (s) => s === 200, {}, WORKER_READY_MS);
    expect(((await http(`${nodeB.httpUrl}/todo`)).json<{ id: string }[]>()).map((t) => t.id).sort()).toEqual(['k-1', 'r-1']);
    expect((await http(`${nodeB.httpUrl}/todo`, { method: 'POST', body: JSON.stringify({ id: 'k-2' }), headers: json })).status).toBe(201);
    await client.next((f) => f.id === 'k-2' && f.event.type === 'create', 15_000, 'create of k-2 after the kill');
  }, 90_000);
});
