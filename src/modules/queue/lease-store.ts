import type { DeadLetterView, LaneSettings, LaneStats, QueueJob } from './queue-job.js';

/**
 * A store that hands messages out under a lease: the embedded store (held by the primary) and the
 * Redis FIFO store implement it, and one consumer loop (pull-consumer.ts) runs over either.
 *
 * Order and concurrency are decided inside the store, in one place per lane, so they hold across
 * every process and node: a lane never has more than `concurrency` messages (or, for FIFO, groups)
 * leased at once, and a FIFO group's next message is not handed out before the one ahead of it is
 * acknowledged or dead-lettered. A lease that is not renewed expires (its holder died): the message
 * counts a failed attempt and is handed out again — at least once.
 */
export interface LeaseStore {
  enqueue(job: QueueJob): Promise<void>;
  /** Leases up to `max` messages of a lane for `leaseMs`. */
  claim(lane: LaneSettings, max: number, leaseMs: number): Promise<QueueJob[]>;
  /** Done: the message leaves the store. False when the lease was lost (it ran again elsewhere). */
  ack(lane: string, id: string): Promise<boolean>;
  /** Failed attempt: retried after its backoff, or dead-lettered when out of attempts. */
  fail(lane: string, id: string, error: string): Promise<'retry' | 'dead' | 'lost'>;
  /** Extends the leases this holder still runs. */
  renew(lane: string, ids: readonly string[], leaseMs: number): Promise<void>;
  deadLetters(lane: string, offset: number, limit: number): Promise<DeadLetterView[]>;
  /** Moves every dead letter of the lane back to it, attempts reset; returns how many. */
  redrive(lane: string): Promise<number>;
  redriveOne(lane: string, id: string): Promise<boolean>;
  discard(lane: string, id: string): Promise<boolean>;
  stats(lane: string): Promise<LaneStats>;
  /** Lanes that hold anything (messages or dead letters). */
  lanes(): Promise<string[]>;
  /**
   * Where another process shares the store (the embedded store across children): `listener` hears
   * of a lane that may now have a message to claim or a free slot (another process enqueued, finished
   * or failed one), so this process's consumer claims at once instead of at its next poll.
   */
  onReady?(listener: (lane: string) => void): void;
  close(): Promise<void>;
}
