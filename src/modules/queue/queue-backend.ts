import type { Logger } from 'pino';
import type { BullMqLanes } from './bullmq-lanes.js';
import type { LeaseStore } from './lease-store.js';
import type { JobRunner } from './pull-consumer.js';
import { PullConsumer } from './pull-consumer.js';
import type { DeadLetterView, LaneSettings, LaneStats, QueueJob } from './queue-job.js';

/**
 * Where a lane's messages are kept and how this process consumes them. Two implementations:
 * `StoreBackend` (every lane on a LeaseStore: the embedded store) and `RedisBackend` (standard lanes
 * on BullMQ, FIFO lanes on the Redis FIFO store).
 */
export interface QueueBackend {
  enqueue(job: QueueJob, settings: LaneSettings): Promise<void>;
  /** This process starts running the lane's messages (once per lane). */
  consume(settings: LaneSettings, run: JobRunner): Promise<void>;
  stopConsuming(lane: string): Promise<void>;
  deadLetters(lane: LaneSettings, offset: number, limit: number): Promise<DeadLetterView[]>;
  redrive(lane: LaneSettings): Promise<number>;
  redriveOne(lane: LaneSettings, id: string): Promise<boolean>;
  discard(lane: LaneSettings, id: string): Promise<boolean>;
  stats(lane: LaneSettings): Promise<LaneStats>;
  /** Messages this process runs right now, per lane. */
  inFlightHere(): Map<string, number>;
  close(): Promise<void>;
}

/** Every lane on one LeaseStore, consumed by a PullConsumer per lane. */
export class StoreBackend implements QueueBackend {
  private readonly consumers = new Map<string, PullConsumer>();

  constructor(
    private readonly store: LeaseStore,
    private readonly logger: Logger,
    private readonly leaseMs?: number,
  ) {
    store.onReady?.((lane) => this.consumers.get(lane)?.nudge());
  }

  async enqueue(job: QueueJob): Promise<void> {
    await this.store.enqueue(job);
    this.consumers.get(job.lane)?.nudge();
  }

  consume(settings: LaneSettings, run: JobRunner): Promise<void> {
    if (!this.consumers.has(settings.lane)) {
      const consumer = new PullConsumer(this.store, settings, run, this.logger, this.leaseMs);
      this.consumers.set(settings.lane, consumer);
      consumer.start();
    }
    return Promise.resolve();
  }

  async stopConsuming(lane: string): Promise<void> {
    const consumer = this.consumers.get(lane);
    this.consumers.delete(lane);
    await consumer?.close();
  }

  deadLetters(lane: LaneSettings, offset: number, limit: number): Promise<DeadLetterView[]> {
    return this.store.deadLetters(lane.lane, offset, limit);
  }

  async redrive(lane: LaneSettings): Promise<number> {
    const count = await this.store.redrive(lane.lane);
    this.consumers.get(lane.lane)?.nudge();
    return count;
  }

  async redriveOne(lane: LaneSettings, id: string): Promise<boolean> {
    const found = await this.store.redriveOne(lane.lane, id);
    this.consumers.get(lane.lane)?.nudge();
    return found;
  }

  discard(lane: LaneSettings, id: string): Promise<boolean> {
    return this.store.discard(lane.lane, id);
  }

  stats(lane: LaneSettings): Promise<LaneStats> {
    return this.store.stats(lane.lane);
  }

  inFlightHere(): Map<string, number> {
    return new Map([...this.consumers].map(([lane, consumer]) => [lane, consumer.inFlight]));
  }

  async close(): Promise<void> {
    const consumers = [...this.consumers.values()];
    this.consumers.clear();
    await Promise.allSettled(consumers.map((consumer) => consumer.close()));
  }
}

/** Redis: standard lanes on BullMQ, FIFO lanes on the Redis FIFO store (BullMQ's groups are paid). */
export class RedisBackend implements QueueBackend {
  private readonly fifo: StoreBackend;
  private readonly running = new Map<string, number>();

  constructor(
    private readonly bull: BullMqLanes,
    fifoStore: LeaseStore,
    logger: Logger,
    leaseMs?: number,
  ) {
    this.fifo = new StoreBackend(fifoStore, logger, leaseMs);
  }

  enqueue(job: QueueJob, settings: LaneSettings): Promise<void> {
    return settings.fifo ? this.fifo.enqueue(job) : this.bull.enqueue(job);
  }

  consume(settings: LaneSettings, run: JobRunner): Promise<void> {
    if (settings.fifo) return this.fifo.consume(settings, run);
    const counted: JobRunner = async (job) => {
      this.running.set(settings.lane, (this.running.get(settings.lane) ?? 0) + 1);
      try {
        return await run(job);
      } finally {
        this.running.set(settings.lane, (this.running.get(settings.lane) ?? 1) - 1);
      }
    };
    return this.bull.consume(settings, counted);
  }

  async stopConsuming(lane: string): Promise<void> {
    await Promise.all([this.fifo.stopConsuming(lane), this.bull.stopConsuming(lane)]);
  }

  deadLetters(lane: LaneSettings, offset: number, limit: number): Promise<DeadLetterView[]> {
    return lane.fifo ? this.fifo.deadLetters(lane, offset, limit) : this.bull.deadLetters(lane.lane, offset, limit);
  }

  redrive(lane: LaneSettings): Promise<number> {
    return lane.fifo ? this.fifo.redrive(lane) : this.bull.redrive(lane.lane);
  }

  redriveOne(lane: LaneSettings, id: string): Promise<boolean> {
    return lane.fifo ? this.fifo.redriveOne(lane, id) : this.bull.redriveOne(lane.lane, id);
  }

  discard(lane: LaneSettings, id: string): Promise<boolean> {
    return lane.fifo ? this.fifo.discard(lane, id) : this.bull.discard(lane.lane, id);
  }

  stats(lane: LaneSettings): Promise<LaneStats> {
    return lane.fifo ? this.fifo.stats(lane) : this.bull.stats(lane.lane);
  }

  inFlightHere(): Map<string, number> {
    const out = this.fifo.inFlightHere();
    for (const [lane, n] of this.running) out.set(lane, n);
    return out;
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.fifo.close(), this.bull.close()]);
  }
}
