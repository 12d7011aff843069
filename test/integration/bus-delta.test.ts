// Issue 28: the Redis bus sends a change as a delta on the peer's version chain (docs/scale.md). Two
// RedisBus peers on a real redis-server: what travels, what is stored, and the resync paths (a gap,
// a failed resync read, a lost last delta announced by a node of an earlier build) end on the sender's state.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { BusHandlers } from '../../src/bus/bus.js';
import { REDIS_BUS_PROTOCOL, encodeBusMessage } from '../../src/bus/bus-messages.js';
import { RedisBus } from '../../src/bus/redis-bus.js';
import { RedisKeyspace } from '../../src/bus/redis-keyspace.js';
import type { WireSnapshot, WireTrigger } from '../../src/bus/wire-snapshot.js';
import type { RedisServer } from '../support/redis.js';
import { startRedisServer } from '../support/redis.js';

const SECRET = 'delta-secret';
const route = (i: number): WireTrigger => ({ id: `t${i}`, functionId: 'app::fn', workerId: 'w1', registeredAt: 1700000000000 + i, seq: i, type: 'http', http: { apiPath: `/r/${i}`, httpMethod: 'GET' } });
const snapshot = (ownerId: string, version: number, routes: number): WireSnapshot => ({
  ownerId,
  version,
  functions: [{ id: 'app::fn', workerId: 'w1' }],
  triggers: Array.from({ length: routes }, (_, i) => route(i)),
  endpoint: { nodeId: 'n', host: '127.0.0.1', port: 4100 },
});

async function waitFor(predicate: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await predicate())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('Redis bus protocol 2: deltas on a version chain', () => {
  let redis: RedisServer;
  let spy: Redis;
  let client: Redis;
  const buses: RedisBus[] = [];
  const captured: string[] = [];
  let name = '';

  beforeAll(async () => {
    redis = await startRedisServer();
    client = new Redis(redis.url);
  });
  afterEach(async () => {
    await Promise.all(buses.splice(0).map((bus) => bus.close()));
    spy?.disconnect();
    captured.length = 0;
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  async function peers(): Promise<{ a: RedisBus; b: RedisBus; aId: string; held: Map<string, WireSnapshot>; keyspace: RedisKeyspace }> {
    name = `d${randomBytes(4).toString('hex')}`;
    spy = new Redis(redis.url);
    await spy.subscribe(`${name}:bus`);
    spy.on('message', (_channel: string, text: string) => captured.push(text));
    const logger = pino({ level: 'silent' });
    const make = (peerId: string): RedisBus => {
      const bus = new RedisBus({ url: redis.url, cluster: name, secret: SECRET, peerId, heartbeatMs: 100, leaseMs: 1000, logger });
      buses.push(bus);
      return bus;
    };
    const held = new Map<string, WireSnapshot>();
    const handlers: BusHandlers = { snapshot: (s) => held.set(s.ownerId, s), peerGone: (id) => held.delete(id) };
    const a = make('a/0/x');
    const b = make('b/0/x');
    await a.start({ snapshot: () => undefined, peerGone: () => undefined });
    await b.start(handlers);
    return { a, b, aId: 'a/0/x', held, keyspace: new RedisKeyspace(name, SECRET) };
  }

  const kinds = (): string[] => captured.map((t) => /"kind":"(\w+)"/.exec(t)?.[1] ?? '?');

  it('publishes the first state in full and each change as a delta of what changed, flat in the table size', async () => {
    const { a, held, aId } = await peers();
    a.publish(snapshot(aId, 1, 1000));
    await waitFor(() => held.get(aId)?.version === 1, 5000, 'b to hold a@1');
    // The spy is a subscriber of its own: it may see a message after b has acted on it.
    await waitFor(() => kinds().includes('snapshot'), 5000, 'the spy to see the snapshot');
    const fullBytes = captured.find((t) => t.includes('"kind":"snapshot"'))?.length ?? 0;
    a.publish(snapshot(aId, 2, 1001));
    await waitFor(() => held.get(aId)?.version === 2, 5000, 'b to hold a@2');
    expect(held.get(aId)?.triggers).toHaveLength(1001);
    await waitFor(() => kinds().includes('delta'), 5000, 'the spy to see the delta');
    const deltaText = captured.filter((t) => t.includes('"kind":"delta"')).at(-1) ?? '';
    expect(kinds()[0]).toBe('snapshot');
    expect(deltaText).toContain('/r/1000');
    expect(deltaText).not.toContain('/r/999"');
    expect(deltaText).toContain(`"p":${REDIS_BUS_PROTOCOL}`);
    expect(deltaText.length * 50).toBeLessThan(fullBytes);
    // Stored: the checkpoint at version 1 and the delta in the log.
    expect(await client.llen(`${name}:log:${aId}`)).toBe(1);
  });

  it('resyncs a peer from checkpoint and log on a gap, and drops the delta that did not chain', async () => {
    const { a, held, aId, keyspace } = await peers();
    a.publish(snapshot(aId, 1, 3));
    await waitFor(() => held.get(aId)?.version === 1, 5000, 'b to hold a@1');
    a.publish(snapshot(aId, 2, 4));
    await waitFor(() => held.get(aId)?.version === 2, 5000, 'b to hold a@2');
    // A delta from a version b does not hold (sealed with the secret, as if a message had been lost).
    const gap = { ownerId: aId, from: 7, to: 8, set: { triggers: [route(99)] }, del: {} };
    await client.publish(`${name}:bus`, keyspace.seal(JSON.stringify(encodeBusMessage(name, { kind: 'delta', delta: gap }, REDIS_BUS_PROTOCOL))));
    a.publish(snapshot(aId, 3, 5));
    await waitFor(() => held.get(aId)?.version === 3, 5000, 'b to hold a@3');
    expect(held.get(aId)?.triggers.map((t) => t.id)).toEqual(['t0', 't1', 't2', 't3', 't4']);
  });

  it('publishes no announcement of its version after a change: the channel carries the snapshot and the deltas only', async () => {
    const { a, held, aId } = await peers();
    a.publish(snapshot(aId, 1, 2));
    await waitFor(() => held.get(aId)?.version === 1, 5000, 'b to hold a@1');
    a.publish(snapshot(aId, 2, 3));
    await waitFor(() => held.get(aId)?.version === 2, 5000, 'b to hold a@2');
    await new Promise((resolve) => setTimeout(resolve, 500)); // 5 heartbeat intervals after the burst
    expect(kinds()).toEqual(['snapshot', 'delta']);
  });

  it('reads a peer again at the next intervals while its resync fails, and ends on the stored state', async () => {
    const { a, b, held, aId, keyspace } = await peers();
    a.publish(snapshot(aId, 1, 2));
    await waitFor(() => held.get(aId)?.version === 1, 5000, 'b to hold a@1');
    await waitFor(async () => (await client.exists(`${name}:peer:${aId}`)) === 1, 5000, "a's checkpoint");
    // b's next two reads of a peer's checkpoint and log fail (as on a Redis that refuses them).
    const store = (b as unknown as { store: { read: (cmd: Redis, peerId: string) => Promise<unknown> } }).store;
    const read = store.read.bind(store);
    let reads = 0;
    store.read = (cmd, peerId) => (++reads <= 2 ? Promise.reject(new Error('read refused in the test')) : read(cmd, peerId));
    // a's log holds 1 → 2 (its publication lost) and 2 → 3; only 2 → 3 reaches the channel: a gap at b.
    const seal = (message: Parameters<typeof encodeBusMessage>[1]): string => keyspace.seal(JSON.stringify(encodeBusMessage(name, message, REDIS_BUS_PROTOCOL)));
    const lost = { ownerId: aId, from: 1, to: 2, set: { triggers: [route(2)] }, del: {} };
    const next = { ownerId: aId, from: 2, to: 3, set: { triggers: [route(3)] }, del: {} };
    await client.rpush(`${name}:log:${aId}`, seal({ kind: 'delta', delta: lost }), seal({ kind: 'delta', delta: next }));
    await client.publish(`${name}:bus`, seal({ kind: 'delta', delta: next }));
    await waitFor(() => held.get(aId)?.version === 3, 5000, 'b to hold a@3 after two failed reads');
    expect(reads).toBe(3);
    expect(held.get(aId)?.triggers.map((t) => t.id)).toEqual(['t0', 't1', 't2', 't3']);
    expect(kinds()).not.toContain('heartbeat');
  });

  it('repairs a lost last delta from the log when a heartbeat announces the version (as nodes of earlier builds send)', async () => {
    const { a, held, aId, keyspace } = await peers();
    a.publish(snapshot(aId, 1, 2));
    await waitFor(() => held.get(aId)?.version === 1, 5000, 'b to hold a@1');
    await waitFor(async () => (await client.exists(`${name}:peer:${aId}`)) === 1, 5000, "a's checkpoint");
    // A delta stored in a's log but never announced on the channel, then a's version announced.
    const lost = { ownerId: aId, from: 1, to: 2, set: { triggers: [route(2)] }, del: {} };
    const seal = (message: Parameters<typeof encodeBusMessage>[1]): string => keyspace.seal(JSON.stringify(encodeBusMessage(name, message, REDIS_BUS_PROTOCOL)));
    await client.rpush(`${name}:log:${aId}`, seal({ kind: 'delta', delta: lost }));
    await client.publish(`${name}:bus`, seal({ kind: 'heartbeat', peerId: aId, version: 2 }));
    await waitFor(() => held.get(aId)?.version === 2, 5000, 'b to fetch a@2 from the log');
    expect(held.get(aId)?.triggers.map((t) => t.id)).toEqual(['t0', 't1', 't2']);
  });

  it('publishes nothing while idle, and keeps a live peer (its liveness is in the sorted set)', async () => {
    const { a, held, aId } = await peers();
    a.publish(snapshot(aId, 1, 1));
    await waitFor(() => held.get(aId)?.version === 1, 5000, 'b to hold a@1');
    await new Promise((resolve) => setTimeout(resolve, 300)); // whatever the change publishes has arrived
    const before = captured.length;
    await new Promise((resolve) => setTimeout(resolve, 2500)); // 25 heartbeat intervals, 2.5 leases
    expect(captured.slice(before)).toEqual([]);
    expect(held.has(aId)).toBe(true);
    expect(await client.zscore(`${name}:alive`, aId)).not.toBeNull();
  });

  it('keeps the lease of a peer whose writes never stop, so no other node drops its routes', async () => {
    // Issue 23's attack run: a process whose changes never stop has a write in flight at every
    // heartbeat. Its writes are slowed here (300 ms each, as megabyte messages on a loaded Redis are),
    // and it changes every 20 ms for 3 leases: b must hold it all along.
    const { a, held, aId } = await peers();
    a.publish(snapshot(aId, 1, 1));
    await waitFor(() => held.get(aId)?.version === 1, 5000, 'b to hold a@1');
    const cmd = (a as unknown as { cmd: Redis }).cmd;
    const multi = cmd.multi.bind(cmd);
    cmd.multi = ((...args: Parameters<Redis['multi']>) => {
      const pipeline = multi(...args);
      const exec = pipeline.exec.bind(pipeline);
      pipeline.exec = (async (...execArgs: Parameters<typeof exec>) => {
        await new Promise((resolve) => setTimeout(resolve, 300));
        return exec(...execArgs);
      });
      return pipeline;
    }) as typeof cmd.multi;
    let version = 1;
    let missing = 0;
    const until = performance.now() + 3000;
    while (performance.now() < until) {
      a.publish(snapshot(aId, ++version, 1 + (version % 2)));
      if (!held.has(aId)) missing++;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(missing).toBe(0);
    expect(held.get(aId)?.version).toBeGreaterThan(2);
  });
});
