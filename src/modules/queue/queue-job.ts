/**
 * What the queue stores and hands to consumers, whatever the store (embedded or Redis).
 *
 * A *lane* is one stream of messages with its own settings and dead-letter store: a named queue
 * (`iii-queue` `queue_configs`), or one durable-topic subscriber (`topic` × function id).
 */

/** The settings a lane runs with (a named queue's, or a durable subscriber's `queue_config`). */
export interface LaneSettings {
  /** The lane's key in the store (docs/queue.md#lanes). */
  readonly lane: string;
  /** Cluster-wide: messages (standard) or message groups (fifo) in flight at once. */
  readonly concurrency: number;
  readonly fifo: boolean;
  /** Total delivery attempts before the dead-letter store. */
  readonly maxAttempts: number;
  /** Retry n waits `backoffMs × 2^(n−1)`. */
  readonly backoffMs: number;
  readonly pollIntervalMs: number;
}

/** One message as stored. */
export interface QueueJob {
  /** The receipt id the enqueuer got (`messageReceiptId`); unique. */
  id: string;
  lane: string;
  functionId: string;
  data: unknown;
  /** Failed attempts so far. */
  attemptsMade: number;
  maxAttempts: number;
  backoffMs: number;
  /** FIFO message group; unset on standard lanes (each message is its own group). */
  group?: string;
  traceparent?: string;
  baggage?: string;
  /** Wall-clock ms. */
  createdAt: number;
}

/** A dead letter as stored: the job with the error of its last attempt. */
export interface DeadLetter {
  job: QueueJob;
  error: string;
  /** Wall-clock ms. */
  failedAt: number;
}

/** A dead letter as `engine::queue::dlq_messages` shows it (iii's `DlqMessage`). */
export interface DeadLetterView {
  id: string;
  payload: unknown;
  error: string;
  /** Seconds since the epoch (iii's unit for this field). */
  failed_at: number;
  retries: number;
  size_bytes: number;
}

export function deadLetterView(letter: DeadLetter): DeadLetterView {
  return {
    id: letter.job.id,
    payload: letter.job.data,
    error: letter.error,
    failed_at: Math.floor(letter.failedAt / 1000),
    retries: letter.job.attemptsMade,
    size_bytes: Buffer.byteLength(JSON.stringify(letter)),
  };
}

/** Per-lane numbers: `depth` counts waiting, delayed and in-flight messages (as iii's depth). */
export interface LaneStats {
  depth: number;
  inFlight: number;
  deadLetters: number;
  /** Since the store was created: attempts that failed and were scheduled again. */
  retried: number;
  /** Since the store was created: messages moved to the dead-letter store. */
  deadLettered: number;
}

/** Retry delay after `attemptsMade` failed attempts (1, 2, …). */
export function backoffDelayMs(backoffMs: number, attemptsMade: number): number {
  return Math.min(backoffMs * 2 ** Math.max(0, attemptsMade - 1), 2_147_483_647);
}

/** The outcome of one attempt, as the consumer reports it. */
export type AttemptOutcome = { ok: true } | { ok: false; error: string };
