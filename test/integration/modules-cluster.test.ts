// iii-state, iii-pubsub and iii-cron across a cluster (docs/modules.md), with real iii-sdk 0.22.1
// workers in this process: an embedded engine of two processes (the primary holds the store), and
// two Redis-mode nodes. A write on one process or node is read on the other; a state trigger and a
// subscriber registered on one fire for a write or publish on the other; cron fires each tick once
// in the whole cluster, also after the node that fired it is killed.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import type { RedisServer } from '../support/redis.js';
import { startRedisServer } from '../support/redis.js';

process.env.OTEL_ENABLED = 'false';
const { registerWorker } = await import('iii-sdk');
type Client = ReturnType<typeof registerWorker>;

const RECONNECT = { maxRetries: 3, initialDelayMs: 100, maxDelayMs: 1000 };
const EVERY_SECOND = '* * * * * *';

interface CronEvent {
  trigger: string;
  job_id: string;
  scheduled_time: string;
  actual_time: string;
}

/** The peer (engine process) a named worker is connected to, from the admin view. */
async function peerOf(engine: EngineHandle, name: string): Promise<string | undefined> {
  const res = await http(`${engine.adminUrl}/workers`);
  if (res.status !== 200) return undefined;
  const workers = res.json<{ name?: string; peer: string }[]>();
  return workers.find((w) => w.name === name)?.peer;
}

async function connect(engine: EngineHandle, name: string): Promise<{ client: Client; peer: string }> {
  const client = registerWorker(engine.workerUrl, { reconnectionConfig: RECONNECT, workerName: name });
  let peer: string | undefined;
  await waitUntil(async () => (peer = await peerOf(engine, name)) !== undefined, 10_000, `${name} registered`);
  return { client, peer: peer as string };
}

/** A function that records what it is called with. */
function recorder<T>(client: Client, id: string): T[] {
  const seen: T[] = [];
  client.registerFunction(id, (event: T) => {
    seen.push(event);
    return Promise.resolve({});
  });
  return seen;
}

/** Waits until the process `client` is connected to holds a trigger for `functionId` in its table. */
async function registered(client: Client, functionId: string): Promise<void> {
  await waitUntil(
    async () => {
      const listed = await client.trigger<unknown, { registered_triggers?: unknown[] }>({
        function_id: 'engine::registered-triggers::list',
        payload: { function_id: functionId },
      });
      return (listed.registered_triggers?.length ?? 0) > 0;
    },
    10_000,
    `a trigger of ${functionId} in the table`,
  );
}

const leaderLine = (line: string): boolean => line.includes('fires the cluster\'s cron jobs');

function expectOncePerTick(events: readonly CronEvent[]): void {
  const ticks = events.map((e) => e.scheduled_time);
  expect(new Set(ticks).size).toBe(ticks.length);
  for (const event of events) {
    expect(event.trigger).toBe('cron');
    expect(event.scheduled_time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$/);
  }
}

describe('modules on an embedded cluster of two processes (the primary holds the store)', () => {
  let engine: EngineHandle;
  let dataDir: string;
  const clients: Client[] = [];
  let a: Client;
  let b: Client;

  const modules = () => [
    { name: 'iii-state', config: { adapter: { name: 'kv', config: { store_method: 'file_based', file_path: dataDir, save_interval_ms: 100 } } } },
    { name: 'iii-pubsub', config: { adapter: { name: 'local' } } },
    { name: 'iii-cron', config: { adapter: { name: 'kv' } } },
  ];

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'switchyard-modules-'));
    engine = await startEngine({ cluster: { processes: 2 }, modules: modules(), logLevel: 'info' });
    const first = await connect(engine, 'writer');
    a = first.client;
    clients.push(a);
    // node:cluster hands connections to the children in turn: a second worker lands on the other one.
    for (let attempt = 0; ; attempt++) {
      const second = await connect(engine, `reader-${attempt}`);
      clients.push(second.client);
      if (second.peer !== first.peer) {
        b = second.client;
        break;
      }
      if (attempt === 5) throw new Error('every worker landed on the same process');
    }
  }, 60_000);

  afterAll(async () => {
    for (const client of clients) await client.shutdown().catch(() => undefined);
    await engine?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('a write on one process is read on the other, and the state trigger registered there fires once', async () => {
    const events = recorder<{ event_type: string; key: string; old_value: unknown; new_value: unknown }>(b, 'mc::on-state');
    b.registerTrigger({ type: 'state', function_id: 'mc::on-state', config: { scope: 'mc' } });
    await registered(a, 'mc::on-state');
    expect(await a.trigger({ function_id: 'state::set', payload: { scope: 'mc', key: 'k1', value: { n: 1 } } })).toEqual({ old_value: null, new_value: { n: 1 } });
    expect(await b.trigger({ function_id: 'state::get', payload: { scope: 'mc', key: 'k1' } })).toEqual({ n: 1 });
    const updated = await b.trigger({ function_id: 'state::update', payload: { scope: 'mc', key: 'k1', ops: [{ type: 'increment', path: 'n', by: 4 }] } });
    expect(updated).toEqual({ old_value: { n: 1 }, new_value: { n: 5 } });
    expect(await a.trigger({ function_id: 'state::get', payload: { scope: 'mc', key: 'k1' } })).toEqual({ n: 5 });
    await waitUntil(() => events.length >= 2, 10_000, 'two state events');
    await new Promise((r) => setTimeout(r, 300));
    // Each event once, with its values. Not their order: the process that applies a write fires its
    // triggers without waiting for them (iii spawns each trigger call too), so the created event,
    // forwarded from the other process, may reach the handler after the updated one fired here.
    const seen = events.map((e) => [e.event_type, e.key, e.old_value, e.new_value]);
    seen.sort((x, y) => String(x[0]).localeCompare(String(y[0])));
    expect(seen).toEqual([
      ['state:created', 'k1', null, { n: 1 }],
      ['state:updated', 'k1', { n: 1 }, { n: 5 }],
    ]);
  });

  it('concurrent updates of one key from both processes lose nothing', async () => {
    await a.trigger({ function_id: 'state::set', payload: { scope: 'mc', key: 'counter', value: { n: 0 } } });
    const bump = (client: Client) => client.trigger({ function_id: 'state::update', payload: { scope: 'mc', key: 'counter', ops: [{ type: 'increment', path: 'n', by: 1 }] } });
    await Promise.all(Array.from({ length: 50 }, (_, i) => bump(i % 2 === 0 ? a : b)));
    expect(await a.trigger({ function_id: 'state::get', payload: { scope: 'mc', key: 'counter' } })).toEqual({ n: 50 });
  });

  it('bad input answers iii\'s error codes', async () => {
    await expect(a.trigger({ function_id: 'state::set', payload: { key: 'k' } })).rejects.toMatchObject({ code: 'deserialization_error' });
    await expect(a.trigger({ function_id: 'publish', payload: { topic: '', data: 1 } })).rejects.toMatchObject({ code: 'topic_not_set' });
  });

  it('a publish on one process reaches the subscriber registered on the other, once', async () => {
    const got = recorder<unknown>(b, 'mc::sub');
    b.registerTrigger({ type: 'subscribe', function_id: 'mc::sub', config: { topic: 'mc.topic' } });
    await registered(a, 'mc::sub');
    await a.trigger({ function_id: 'publish', payload: { topic: 'mc.topic', data: { hello: 'b' } } });
    await waitUntil(() => got.length >= 1, 10_000, 'the published message');
    await new Promise((r) => setTimeout(r, 300));
    expect(got).toEqual([{ hello: 'b' }]);
  });

  it('a cron trigger fires once per tick across both processes', async () => {
    const fired = recorder<CronEvent>(b, 'mc::tick');
    b.registerTrigger({ type: 'cron', function_id: 'mc::tick', config: { expression: EVERY_SECOND } });
    await waitUntil(() => fired.length >= 4, 20_000, 'four cron ticks');
    expectOncePerTick(fired);
    expect(engine.stdout.lines.filter(leaderLine)).toHaveLength(1);
  });

  it('a file_based store survives an engine restart', async () => {
    await a.trigger({ function_id: 'state::set', payload: { scope: 'persist', key: 'p', value: { kept: true } } });
    for (const client of clients.splice(0)) await client.shutdown().catch(() => undefined);
    await engine.stop();
    engine = await startEngine({ cluster: { processes: 2 }, modules: modules(), logLevel: 'info' });
    const reader = await connect(engine, 'after-restart');
    clients.push(reader.client);
    expect(await reader.client.trigger({ function_id: 'state::get', payload: { scope: 'persist', key: 'p' } })).toEqual({ kept: true });
    expect(await reader.client.trigger({ function_id: 'state::list_groups', payload: {} })).toMatchObject({ groups: expect.arrayContaining(['mc', 'persist']) });
  }, 60_000);
});

describe('modules on two Redis-mode nodes', () => {
  let redis: RedisServer;
  const nodes: EngineHandle[] = [];
  const clients: Client[] = [];

  const startNode = (nodeId: string, name: string) =>
    startEngine({
      cluster: { processes: 1, redis_url: redis.url, secret: 'modules-secret', name, node_id: nodeId, advertise_host: '127.0.0.1', heartbeat_ms: 200, lease_ms: 1000 },
      modules: [
        { name: 'iii-state', config: { adapter: { name: 'kv' } } },
        { name: 'iii-pubsub', config: {} },
        { name: 'iii-cron', config: { adapter: { name: 'redis' } } },
      ],
      logLevel: 'info',
    });

  beforeAll(async () => {
    redis = await startRedisServer();
    const name = `m${Math.random().toString(36).slice(2, 8)}`;
    nodes.push(await startNode('node-a', name), await startNode('node-b', name));
  }, 60_000);

  afterAll(async () => {
    for (const client of clients) await client.shutdown().catch(() => undefined);
    for (const node of nodes) await node.stop().catch(() => undefined);
    await redis?.stop();
  });

  it('a write on node A is read on node B; B\'s state trigger and subscriber fire for A\'s write and publish', async () => {
    const [nodeA, nodeB] = nodes as [EngineHandle, EngineHandle];
    const { client: a } = await connect(nodeA, 'on-a');
    const { client: b } = await connect(nodeB, 'on-b');
    clients.push(a, b);
    const events = recorder<{ event_type: string; new_value: unknown }>(b, 'rm::on-state');
    b.registerTrigger({ type: 'state', function_id: 'rm::on-state', config: { scope: 'rm', key: 'x' } });
    const got = recorder<unknown>(b, 'rm::sub');
    b.registerTrigger({ type: 'subscribe', function_id: 'rm::sub', config: { topic: 'rm.topic' } });
    await registered(a, 'rm::on-state');
    await registered(a, 'rm::sub');
    await a.trigger({ function_id: 'state::set', payload: { scope: 'rm', key: 'x', value: 'from-a' } });
    expect(await b.trigger({ function_id: 'state::get', payload: { scope: 'rm', key: 'x' } })).toBe('from-a');
    await a.trigger({ function_id: 'publish', payload: { topic: 'rm.topic', data: 7 } });
    await waitUntil(() => events.length >= 1 && got.length >= 1, 10_000, 'the state event and the message on node B');
    await new Promise((r) => setTimeout(r, 300));
    expect(events.map((e) => [e.event_type, e.new_value])).toEqual([['state:created', 'from-a']]);
    expect(got).toEqual([7]);
  });

  it('cron fires once per tick across both nodes, and goes on after the firing node is killed', async () => {
    await waitUntil(() => nodes.some((node) => node.stdout.lines.some(leaderLine)), 10_000, 'a cron leader');
    const leader = nodes.find((node) => node.stdout.lines.some(leaderLine)) as EngineHandle;
    const other = nodes.find((node) => node !== leader) as EngineHandle;
    // The cron trigger's worker is on the node that survives.
    const { client } = await connect(other, 'cron-owner');
    clients.push(client);
    const fired = recorder<CronEvent>(client, 'rm::tick');
    client.registerTrigger({ type: 'cron', function_id: 'rm::tick', config: { expression: EVERY_SECOND } });
    await waitUntil(() => fired.length >= 3, 20_000, 'three ticks');
    expectOncePerTick(fired);
    const before = fired.length;
    await leader.killAll();
    await waitUntil(() => other.stdout.lines.some(leaderLine), 15_000, 'the surviving node taking the cron lease');
    await waitUntil(() => fired.length >= before + 3, 20_000, 'three more ticks after the kill');
    expectOncePerTick(fired);
  }, 60_000);
});
