import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BullMqLanes } from '../../src/modules/queue/bullmq-lanes.js';
import type { QueueJob } from '../../src/modules/queue/queue-job.js';
import { RedisFifoStore } from '../../src/modules/queue/redis-fifo-store.js';
import { leaseStoreCases } from '../support/lease-store-cases.js';
import type { RedisServer } from '../support/redis.js';
import { startRedisServer } from '../support/redis.js';
import { waitUntil } from '../support/logs.js';

/** The Redis-backed queue stores against a real redis-server: the shared conformance suite, and BullMQ lanes. */
let redis: RedisServer;
const connections: Redis[] = [];
const logger = pino({ level: 'silent' });

beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  for (const connection of connections) connection.disconnect();
  await redis?.stop();
});

function connect(): Redis {
  const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
  connections.push(connection);
  return connection;
}

leaseStoreCases('redis fifo', () => Promise.resolve(new RedisFifoStore(connect(), `t${Math.random().toString(36).slice(2, 8)}`)));

describe('BullMQ lanes (standard queues on Redis)', () => {
  const job = (lane: string, id: string, maxAttempts: number): QueueJob => ({
    id,
    lane,
    functionId: 'f',
    data: { id, big: Number.MAX_SAFE_INTEGER },
    attemptsMade: 0,
    maxAttempts,
    backoffMs: 10,
    createdAt: Date.now(),
  });

  it('runs each message, retries failures with backoff, dead-letters after max attempts, redrives', async () => {
    const lanes = new BullMqLanes(connect(), 'bq-test', logger);
    const lane = { lane: 'topic:a%3Ab:fn', concurrency: 3, fifo: false, maxAttempts: 2, backoffMs: 10, pollIntervalMs: 10 };
    const seen = new Map<string, number>();
    let failAlways = true;
    await lanes.consume(lane, (j) => {
      seen.set(j.id, (seen.get(j.id) ?? 0) + 1);
      expect(j.data).toStrictEqual({ id: j.id, big: Number.MAX_SAFE_INTEGER });
      if (j.id.startsWith('bad') && failAlways) return Promise.resolve({ ok: false, error: 'nope' });
      return Promise.resolve({ ok: true });
    });
    for (let i = 0; i < 5; i++) await lanes.enqueue(job(lane.lane, `ok${i}`, 2));
    await lanes.enqueue(job(lane.lane, 'bad1', 2));
    await waitUntil(async () => (await lanes.stats(lane.lane)).deadLetters === 1 && seen.size === 6, 10_000, 'dead letter');
    expect(seen.get('bad1')).toBe(2);
    const stats = await lanes.stats(lane.lane);
    expect(stats).toMatchObject({ depth: 0, deadLetters: 1, retried: 1, deadLettered: 1 });
    const [letter] = await lanes.deadLetters(lane.lane, 0, 10);
    expect(letter).toMatchObject({ id: 'bad1', payload: { id: 'bad1', big: Number.MAX_SAFE_INTEGER }, error: 'nope', retries: 2 });
    failAlways = false;
    expect(await lanes.redriveOne(lane.lane, 'bad1')).toBe(true);
    await waitUntil(async () => (await lanes.stats(lane.lane)).deadLetters === 0 && seen.get('bad1') === 3, 10_000, 'redriven');
    expect(await lanes.discard(lane.lane, 'bad1')).toBe(false);
    await lanes.close();
  });
});
