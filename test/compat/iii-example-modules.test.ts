// An app shaped like iii's example app (test/fixtures/iii-example-app/modules-app.mjs: the todo list on
// streams, the state routes, a cron trigger, a state trigger, a pub/sub subscriber; iii-sdk 0.22.1),
// one copy per node, on two Redis-mode nodes of two processes each, with the example's module
// config (iii-stream on redis, iii-state kv file_based, iii-pubsub local, iii-cron kv). Every route
// and event is checked, then node A is killed without a goodbye (SIGKILL to its primary and
// children, and to the copy of the app connected to it), and everything is checked again on node B.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForStatus } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle, ManagedProcess } from '../support/processes.js';
import { ROOT, spawnManaged, startEngine, stopProcess } from '../support/processes.js';
import type { RedisServer } from '../support/redis.js';
import { freePort, startRedisServer } from '../support/redis.js';
import { RawStreamClient } from '../support/stream-client.js';

const APP = join(ROOT, 'test', 'fixtures', 'iii-example-app', 'modules-app.mjs');
const PROCESSES = 2;
/** Four engine processes, two apps and Redis on a shared 2-core machine start slowly. */
const READY_MS = 90_000;
const jsonHeaders = { 'content-type': 'application/json' };

interface Seen {
  seen: 'cron' | 'state' | 'order';
  app: string;
  job_id?: string;
  scheduled_time?: string;
  event_type?: string;
  key?: string;
  new_value?: unknown;
  order?: { n?: number; probe?: number };
}

/** What one copy of the app printed it received, of one kind. */
function seen(app: ManagedProcess, kind: Seen['seen']): Seen[] {
  const out: Seen[] = [];
  for (const line of app.stdout.lines) {
    if (!line.startsWith('{"seen"')) continue;
    const parsed = JSON.parse(line) as Seen;
    if (parsed.seen === kind) out.push(parsed);
  }
  return out;
}

const send = (url: string, method: string, body?: unknown) => http(url, { method, headers: jsonHeaders, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

/** Each job's ticks fired once: no (job, scheduled time) twice across every copy of the app. */
function expectOncePerTick(events: readonly Seen[]): void {
  const ticks = events.map((e) => `${e.job_id}@${e.scheduled_time}`);
  expect(new Set(ticks).size).toBe(ticks.length);
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 500));

describe('an app shaped like iii-example (streams, state, cron, pub/sub) on two Redis-mode nodes', () => {
  let redis: RedisServer;
  let nodeA: EngineHandle;
  let nodeB: EngineHandle;
  let appA: ManagedProcess;
  let appB: ManagedProcess;
  let streamA: string;
  let streamB: string;
  const clients: RawStreamClient[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    const name = `ex${Math.random().toString(36).slice(2, 8)}`;
    const [portA, portB] = [await freePort(), await freePort()];
    streamA = `ws://127.0.0.1:${portA}/`;
    streamB = `ws://127.0.0.1:${portB}/`;
    const node = (nodeId: string, streamPort: number) =>
      startEngine({
        cluster: { processes: PROCESSES, redis_url: redis.url, secret: 'example-secret', name, node_id: nodeId, advertise_host: '127.0.0.1', heartbeat_ms: 200, lease_ms: 1000 },
        // iii-example's config.yaml, with the stream port and Redis of this test.
        modules: [
          { name: 'iii-stream', config: { port: streamPort, host: '127.0.0.1', adapter: { name: 'redis', config: { redis_url: redis.url } } } },
          { name: 'iii-state', config: { adapter: { name: 'kv', config: { store_method: 'file_based', file_path: './data/state_store.db' } } } },
          { name: 'iii-pubsub', config: { adapter: { name: 'local' } } },
          { name: 'iii-cron', config: { adapter: { name: 'kv' } } },
        ],
        logLevel: 'info',
        readyTimeoutMs: READY_MS,
      });
    nodeA = await node('node-a', portA);
    nodeB = await node('node-b', portB);
    const app = (id: string, engine: EngineHandle) => spawnManaged(process.execPath, [APP], { ...process.env, III_URL: engine.workerUrl, APP: id, OTEL_ENABLED: 'false' });
    appA = app('a', nodeA);
    appB = app('b', nodeB);
    for (const engine of [nodeA, nodeB]) {
      for (const id of ['a', 'b']) await waitForStatus(`${engine.httpUrl}/ready/${id}`, (s) => s === 200, {}, READY_MS);
    }
    // The triggers travel with the routes but reach every process's table on their own time: probe
    // until both copies have heard a state change and a publish (probe events are left out below).
    for (let probe = 0; ; probe++) {
      await send(`${nodeA.httpUrl}/users/probe-${probe}`, 'PUT', { probe });
      await send(`${nodeA.httpUrl}/orders`, 'POST', { probe });
      await settle();
      const heard = (app: ManagedProcess) => seen(app, 'state').length > 0 && seen(app, 'order').length > 0;
      if (heard(appA) && heard(appB)) break;
      if (probe === 60) throw new Error('the apps\' state and subscribe triggers never reached the table');
    }
  }, 240_000);

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    for (const app of [appA, appB]) if (app !== undefined) await stopProcess(app, 'SIGTERM', 5_000);
    await nodeB?.stop();
    await nodeA?.killAll();
    await redis?.stop();
  }, 60_000);

  const realOrders = (app: ManagedProcess) => seen(app, 'order').filter((e) => e.order?.probe === undefined);
  const realStates = (app: ManagedProcess) => seen(app, 'state').filter((e) => !String(e.key).startsWith('probe-'));

  it('todo on streams: every route answers, and a client on each node hears every write in order', async () => {
    const onA = await RawStreamClient.connect(streamA);
    const onB = await RawStreamClient.connect(streamB);
    clients.push(onA, onB);
    for (const client of [onA, onB]) {
      client.join('inbox', 'todo', 'inbox');
      expect(await client.synced('inbox')).toEqual([]);
    }
    const created = await send(`${nodeA.httpUrl}/todo`, 'POST', { id: 't-1', description: 'buy milk' });
    expect(created.status).toBe(201);
    expect(created.json()).toMatchObject({ old_value: null, new_value: { id: 't-1', description: 'buy milk', completedAt: null } });
    expect((await send(`${nodeA.httpUrl}/todo`, 'POST', {})).status).toBe(400);
    const updated = await send(`${nodeB.httpUrl}/todo/t-1`, 'PUT', { completedAt: 'done' });
    expect(updated.status).toBe(200);
    expect(updated.json()).toMatchObject({ old_value: { completedAt: null }, new_value: { id: 't-1', completedAt: 'done' } });
    expect((await send(`${nodeA.httpUrl}/todo/nope`, 'PUT', { completedAt: 'x' })).status).toBe(404);
    expect((await http(`${nodeB.httpUrl}/todo`)).json()).toEqual([expect.objectContaining({ id: 't-1', completedAt: 'done' })]);
    expect((await send(`${nodeA.httpUrl}/todo`, 'DELETE', {})).status).toBe(400);
    expect((await send(`${nodeA.httpUrl}/todo`, 'DELETE', { todoId: 't-1' })).json()).toEqual({ success: true });
    expect((await send(`${nodeB.httpUrl}/todo`, 'POST', { id: 't-2', description: 'kept' })).status).toBe(201);
    // Whichever node each write ran on, the client on the other node heard it, in order.
    for (const client of [onA, onB]) {
      await client.next((f) => f.id === 't-2', 30_000, 'the create of t-2');
      expect(client.frames.filter((f) => f.event.type !== 'sync').map((f) => `${f.id}:${f.event.type}`)).toEqual(['t-1:create', 't-1:update', 't-1:delete', 't-2:create']);
    }
  }, 60_000);

  it('state routes on either node, and each copy\'s users state trigger fires once per write', async () => {
    const created = await send(`${nodeA.httpUrl}/state`, 'POST', { id: 's-1', description: 'in state' });
    expect(created.status).toBe(201);
    expect(created.json()).toMatchObject({ old_value: null, new_value: { id: 's-1', description: 'in state' } });
    expect((await http(`${nodeB.httpUrl}/state/s-1`)).json()).toMatchObject({ id: 's-1', description: 'in state' });
    // An absent key: state::get answers nothing, the route's body is null.
    const absent = await http(`${nodeA.httpUrl}/state/absent`);
    expect(absent.status).toBe(200);
    expect(['', 'null']).toContain(absent.text);
    expect((await send(`${nodeB.httpUrl}/users/u-1`, 'PUT', { name: 'ann' })).status).toBe(200);
    await waitUntil(() => realStates(appA).length >= 1 && realStates(appB).length >= 1, 30_000, 'the state event on both copies');
    await settle();
    for (const app of [appA, appB]) {
      expect(realStates(app).map((e) => [e.event_type, e.key, e.new_value])).toEqual([['state:created', 'u-1', { name: 'ann' }]]);
    }
  }, 60_000);

  it('pub/sub: a publish on one node reaches each copy\'s subscriber once', async () => {
    expect((await send(`${nodeA.httpUrl}/orders`, 'POST', { n: 1 })).status).toBe(202);
    await waitUntil(() => realOrders(appA).length >= 1 && realOrders(appB).length >= 1, 30_000, 'the order on both copies');
    await settle();
    for (const app of [appA, appB]) expect(realOrders(app).map((e) => e.order)).toEqual([{ n: 1 }]);
  }, 60_000);

  it('cron: each copy\'s job fires once per tick across the four processes of both nodes', async () => {
    await waitUntil(() => seen(appA, 'cron').length >= 3 && seen(appB, 'cron').length >= 3, 30_000, 'three ticks of each job');
    const all = [...seen(appA, 'cron'), ...seen(appB, 'cron')];
    expectOncePerTick(all);
    // One job per copy, each called on its own copy only.
    expect(new Set(seen(appA, 'cron').map((e) => e.job_id)).size).toBe(1);
    expect(new Set(seen(appB, 'cron').map((e) => e.job_id)).size).toBe(1);
    expect(seen(appA, 'cron')[0]?.job_id).not.toBe(seen(appB, 'cron')[0]?.job_id);
    for (const event of all) expect(event.scheduled_time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$/);
  }, 60_000);

  it('after node A is killed: streams and state are readable and writable on B, pub/sub and cron go on once', async () => {
    const clientB = clients[1] as RawStreamClient;
    const ticksBefore = seen(appB, 'cron').length;
    await nodeA.killAll();
    await stopProcess(appA, 'SIGKILL');

    // Node A's workers leave the table with its lease; until then its routes' calls fall over to B.
    await waitForStatus(`${nodeB.httpUrl}/todo`, (s) => s === 200, {}, 20_000);
    expect((await http(`${nodeB.httpUrl}/todo`)).json<{ id: string }[]>().map((t) => t.id)).toEqual(['t-2']);
    expect((await http(`${nodeB.httpUrl}/state/s-1`)).json()).toMatchObject({ id: 's-1', description: 'in state' });
    expect((await send(`${nodeB.httpUrl}/todo`, 'POST', { id: 't-3', description: 'after the kill' })).status).toBe(201);
    await clientB.next((f) => f.id === 't-3' && f.event.type === 'create', 30_000, 'the create of t-3 on node B');
    expect((await send(`${nodeB.httpUrl}/state`, 'POST', { id: 's-2', description: 'after' })).status).toBe(201);
    expect((await http(`${nodeB.httpUrl}/state/s-2`)).json()).toMatchObject({ id: 's-2' });

    expect((await send(`${nodeB.httpUrl}/users/u-2`, 'PUT', { name: 'bo' })).status).toBe(200);
    expect((await send(`${nodeB.httpUrl}/orders`, 'POST', { n: 2 })).status).toBe(202);
    await waitUntil(() => realStates(appB).length >= 2 && realOrders(appB).length >= 2, 30_000, 'the state event and the order on B after the kill').catch((err: Error) => {
      throw new Error(`${err.message}: ${JSON.stringify({ states: realStates(appB), orders: realOrders(appB), node: nodeB.stdout.lines.filter((l) => l.includes('warn') || l.includes('"level":40')).slice(-20) })}`);
    });
    await settle();
    expect(realStates(appB).map((e) => e.key)).toEqual(['u-1', 'u-2']);
    expect(realOrders(appB).map((e) => e.order)).toEqual([{ n: 1 }, { n: 2 }]);

    await waitUntil(() => seen(appB, 'cron').length >= ticksBefore + 3, 30_000, 'three more ticks of B\'s job after the kill');
    expectOncePerTick(seen(appB, 'cron'));
  }, 120_000);
});
