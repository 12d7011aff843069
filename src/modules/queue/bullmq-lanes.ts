import { Queue, Worker } from 'bullmq';
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { JobRunner } from './pull-consumer.js';
import type { DeadLetterView, LaneSettings, LaneStats, QueueJob } from './queue-job.js';

/** What BullMQ stores per message (the rest of QueueJob is in BullMQ's own fields). */
interface BullData {
  functionId: string;
  data: unknown;
  traceparent?: string;
  baggage?: string;
  createdAt: number;
}

/**
 * Lock of a running BullMQ job (renewed by the worker every half of it). When a process or node
 * dies, its jobs are found stalled within about lock + check interval and run again elsewhere.
 */
const LOCK_MS = 10_000;
const STALLED_CHECK_MS = 5_000;
/** A job found stalled more often than this goes to the dead-letter store (it keeps killing its runner). */
const MAX_STALLED = 5;

/**
 * Standard lanes on Redis, with BullMQ: a Queue per lane (named after the lane, under
 * `<cluster>:bq`), a Worker per lane in every engine process, the lane's concurrency as BullMQ's
 * global concurrency (cluster-wide) and as each worker's cap, `attempts` and exponential `backoff`
 * as the queue's retries, and BullMQ's failed set as the dead-letter store. Retried and
 * dead-lettered counts are kept in a Redis hash per lane, so they are cluster-wide too.
 */
export class BullMqLanes {
  private readonly queues = new Map<string, Queue>();
  private readonly workers = new Map<string, Worker>();
  private readonly statsPrefix: string;

  constructor(
    private readonly connection: Redis,
    private readonly prefix: string,
    private readonly logger: Logger,
  ) {
    this.statsPrefix = `${prefix}:stats:`;
  }

  private queue(lane: string): Queue {
    let queue = this.queues.get(lane);
    if (queue === undefined) {
      queue = new Queue(queueName(lane), { connection: this.connection, prefix: this.prefix });
      queue.on('error', (err) => this.logger.warn({ err, lane }, 'queue connection error'));
      this.queues.set(lane, queue);
    }
    return queue;
  }

  async enqueue(job: QueueJob): Promise<void> {
    const data: BullData = {
      functionId: job.functionId,
      data: job.data,
      createdAt: job.createdAt,
      ...(job.traceparent === undefined ? {} : { traceparent: job.traceparent }),
      ...(job.baggage === undefined ? {} : { baggage: job.baggage }),
    };
    await this.queue(job.lane).add('message', data, {
      jobId: job.id,
      attempts: job.maxAttempts,
      backoff: { type: 'exponential', delay: job.backoffMs },
      removeOnComplete: true,
      removeOnFail: false,
    });
  }

  /** Starts this process's worker for a lane (once per lane). */
  async consume(settings: LaneSettings, run: JobRunner): Promise<void> {
    if (this.workers.has(settings.lane)) return;
    const queue = this.queue(settings.lane);
    await queue.setGlobalConcurrency(settings.concurrency);
    const worker = new Worker(
      queueName(settings.lane),
      async (job: Job<BullData>) => {
        const outcome = await run(toQueueJob(settings.lane, job));
        if (!outcome.ok) throw new Error(outcome.error);
      },
      {
        connection: this.connection,
        prefix: this.prefix,
        concurrency: settings.concurrency,
        lockDuration: LOCK_MS,
        stalledInterval: STALLED_CHECK_MS,
        maxStalledCount: MAX_STALLED,
      },
    );
    worker.on('error', (err) => this.logger.warn({ err, lane: settings.lane }, 'queue worker error'));
    worker.on('failed', (job) => {
      if (job === undefined) return;
      const dead = job.attemptsMade >= (job.opts.attempts ?? 1);
      this.connection.hincrby(this.statsPrefix + settings.lane, dead ? 'deadLettered' : 'retried', 1).catch(() => undefined);
    });
    this.workers.set(settings.lane, worker);
  }

  async stopConsuming(lane: string): Promise<void> {
    const worker = this.workers.get(lane);
    this.workers.delete(lane);
    await worker?.close();
  }

  async deadLetters(lane: string, offset: number, limit: number): Promise<DeadLetterView[]> {
    const jobs = await this.queue(lane).getFailed(offset, offset + limit - 1);
    return jobs.map((job) => {
      const data = job.data as BullData;
      return {
        id: job.id ?? '',
        payload: data.data,
        error: job.failedReason,
        failed_at: Math.floor((job.finishedOn ?? job.processedOn ?? job.timestamp) / 1000),
        retries: job.attemptsMade,
        size_bytes: Buffer.byteLength(JSON.stringify(job.data)),
      };
    });
  }

  async redrive(lane: string): Promise<number> {
    const queue = this.queue(lane);
    let count = 0;
    for (;;) {
      const jobs = await queue.getFailed(0, 499);
      if (jobs.length === 0) return count;
      for (const job of jobs) {
        await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
        count++;
      }
    }
  }

  async redriveOne(lane: string, id: string): Promise<boolean> {
    const job = await this.queue(lane).getJob(id);
    if (job === undefined || !(await job.isFailed())) return false;
    await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
    return true;
  }

  async discard(lane: string, id: string): Promise<boolean> {
    const job = await this.queue(lane).getJob(id);
    if (job === undefined || !(await job.isFailed())) return false;
    await job.remove();
    return true;
  }

  async stats(lane: string): Promise<LaneStats> {
    const [counts, counters] = await Promise.all([
      this.queue(lane).getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'failed'),
      this.connection.hmget(this.statsPrefix + lane, 'retried', 'deadLettered'),
    ]);
    const n = (key: string): number => counts[key] ?? 0;
    return {
      depth: n('waiting') + n('active') + n('delayed') + n('prioritized') + n('waiting-children'),
      inFlight: n('active'),
      deadLetters: n('failed'),
      retried: Number(counters[0] ?? 0),
      deadLettered: Number(counters[1] ?? 0),
    };
  }

  /** Lanes with a stats hash or a BullMQ queue in Redis. */
  async lanes(): Promise<string[]> {
    const out = new Set<string>();
    let cursor = '0';
    do {
      const [next, keys] = await this.connection.scan(cursor, 'MATCH', `${this.prefix}:*:meta`, 'COUNT', 500);
      cursor = next;
      for (const key of keys) {
        const name = key.slice(this.prefix.length + 1, -':meta'.length);
        out.add(decodeURIComponent(name));
      }
    } while (cursor !== '0');
    return [...out];
  }

  /** Closes workers first (each waits for what it runs), then the queues. Idempotent. */
  async close(): Promise<void> {
    const workers = [...this.workers.values()];
    this.workers.clear();
    await Promise.allSettled(workers.map((worker) => worker.close()));
    const queues = [...this.queues.values()];
    this.queues.clear();
    await Promise.allSettled(queues.map((queue) => queue.close()));
  }
}

/** BullMQ queue names may not hold `:` (its key separator); lanes may (`topic::function`). */
function queueName(lane: string): string {
  return encodeURIComponent(lane);
}

function toQueueJob(lane: string, job: Job<BullData>): QueueJob {
  return {
    id: job.id ?? '',
    lane,
    functionId: job.data.functionId,
    data: job.data.data,
    attemptsMade: job.attemptsMade,
    maxAttempts: job.opts.attempts ?? 1,
    backoffMs: typeof job.opts.backoff === 'object' ? (job.opts.backoff.delay ?? 0) : (job.opts.backoff ?? 0),
    createdAt: job.data.createdAt,
    ...(job.data.traceparent === undefined ? {} : { traceparent: job.data.traceparent }),
    ...(job.data.baggage === undefined ? {} : { baggage: job.data.baggage }),
  };
}
