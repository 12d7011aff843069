import type { Redis } from 'ioredis';
import type { LeaseStore } from './lease-store.js';
import type { DeadLetterView, LaneSettings, LaneStats, QueueJob } from './queue-job.js';
import { ACK_LUA, CLAIM_LUA, DISCARD_LUA, ENQUEUE_LUA, FAIL_LUA, REDRIVE_LUA, REDRIVE_ONE_LUA, RENEW_LUA } from './redis-fifo-lua.js';

/** The group a FIFO lane without a group field puts every message in (a durable topic's `fifo`). */
export const SINGLE_GROUP = '*';

type Scripted = Redis & {
  queueEnqueue(lanes: string, ...args: (string | number)[]): Promise<number>;
  queueClaim(...args: (string | number)[]): Promise<string[]>;
  queueAck(...args: string[]): Promise<number>;
  queueFail(...args: string[]): Promise<string>;
  queueRenew(...args: (string | number)[]): Promise<number>;
  queueRedrive(...args: string[]): Promise<number>;
  queueRedriveOne(...args: string[]): Promise<number>;
  queueDiscard(...args: string[]): Promise<number>;
};

/**
 * FIFO lanes on Redis: BullMQ keeps message groups for its paid edition, so the ordering part is
 * ours — a few Lua scripts (redis-fifo-lua.ts) over lists and sorted sets, run atomically by Redis
 * for the whole cluster (docs/queue.md#fifo-on-redis). The connection is the caller's.
 */
export class RedisFifoStore implements LeaseStore {
  private readonly redis: Scripted;
  private readonly lanesKey: string;

  constructor(
    redis: Redis,
    private readonly prefix: string,
  ) {
    this.lanesKey = `${prefix}:fifo-lanes`;
    redis.defineCommand('queueEnqueue', { numberOfKeys: 1, lua: ENQUEUE_LUA });
    redis.defineCommand('queueClaim', { numberOfKeys: 0, lua: CLAIM_LUA });
    redis.defineCommand('queueAck', { numberOfKeys: 0, lua: ACK_LUA });
    redis.defineCommand('queueFail', { numberOfKeys: 0, lua: FAIL_LUA });
    redis.defineCommand('queueRenew', { numberOfKeys: 0, lua: RENEW_LUA });
    redis.defineCommand('queueRedrive', { numberOfKeys: 0, lua: REDRIVE_LUA });
    redis.defineCommand('queueRedriveOne', { numberOfKeys: 0, lua: REDRIVE_ONE_LUA });
    redis.defineCommand('queueDiscard', { numberOfKeys: 0, lua: DISCARD_LUA });
    this.redis = redis as Scripted;
  }

  private key(lane: string): string {
    return `${this.prefix}:fifo:${lane}`;
  }

  async enqueue(job: QueueJob): Promise<void> {
    await this.redis.queueEnqueue(this.lanesKey, this.key(job.lane), job.lane, job.id, JSON.stringify(job), job.maxAttempts, job.backoffMs, job.group ?? SINGLE_GROUP);
  }

  async claim(lane: LaneSettings, max: number, leaseMs: number): Promise<QueueJob[]> {
    const flat = await this.redis.queueClaim(this.key(lane.lane), max, leaseMs, lane.concurrency);
    const jobs: QueueJob[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) {
      const job = JSON.parse(flat[i + 1] ?? 'null') as QueueJob | null;
      if (job === null) continue;
      job.attemptsMade = Number(flat[i + 2] ?? 0);
      jobs.push(job);
    }
    return jobs;
  }

  async ack(lane: string, id: string): Promise<boolean> {
    return (await this.redis.queueAck(this.key(lane), id)) === 1;
  }

  async fail(lane: string, id: string, error: string): Promise<'retry' | 'dead' | 'lost'> {
    const outcome = await this.redis.queueFail(this.key(lane), id, error);
    return outcome === 'retry' || outcome === 'dead' ? outcome : 'lost';
  }

  async renew(lane: string, ids: readonly string[], leaseMs: number): Promise<void> {
    if (ids.length > 0) await this.redis.queueRenew(this.key(lane), leaseMs, ...ids);
  }

  async deadLetters(lane: string, offset: number, limit: number): Promise<DeadLetterView[]> {
    const key = this.key(lane);
    const ids = await this.redis.lrange(`${key}:dlq`, offset, offset + limit - 1);
    if (ids.length === 0) return [];
    const [jobs, why] = await Promise.all([this.redis.hmget(`${key}:dead`, ...ids), this.redis.hmget(`${key}:why`, ...ids)]);
    const out: DeadLetterView[] = [];
    ids.forEach((id, i) => {
      const raw = jobs[i];
      const reason = why[i];
      if (raw === null || raw === undefined || reason === null || reason === undefined) return;
      const match = /^(\d+) (\d+) ([\s\S]*)$/.exec(reason);
      const job = JSON.parse(raw) as QueueJob;
      out.push({
        id,
        payload: job.data,
        error: match?.[3] ?? reason,
        failed_at: Math.floor(Number(match?.[1] ?? 0) / 1000),
        retries: Number(match?.[2] ?? 0),
        size_bytes: Buffer.byteLength(raw) + Buffer.byteLength(reason),
      });
    });
    return out;
  }

  async redrive(lane: string): Promise<number> {
    return this.redis.queueRedrive(this.key(lane));
  }

  async redriveOne(lane: string, id: string): Promise<boolean> {
    return (await this.redis.queueRedriveOne(this.key(lane), id)) === 1;
  }

  async discard(lane: string, id: string): Promise<boolean> {
    return (await this.redis.queueDiscard(this.key(lane), id)) === 1;
  }

  async stats(lane: string): Promise<LaneStats> {
    const key = this.key(lane);
    const [depth, inFlight, deadLetters, counters] = await Promise.all([
      this.redis.hlen(`${key}:jobs`),
      this.redis.zcard(`${key}:leases`),
      this.redis.llen(`${key}:dlq`),
      this.redis.hmget(`${key}:stats`, 'retried', 'deadLettered'),
    ]);
    return { depth, inFlight, deadLetters, retried: Number(counters[0] ?? 0), deadLettered: Number(counters[1] ?? 0) };
  }

  async lanes(): Promise<string[]> {
    return this.redis.smembers(this.lanesKey);
  }

  close(): Promise<void> {
    // The connection is the caller's to close.
    return Promise.resolve();
  }
}
