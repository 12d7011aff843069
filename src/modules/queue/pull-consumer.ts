import type { Logger } from 'pino';
import type { LeaseStore } from './lease-store.js';
import type { AttemptOutcome, LaneSettings, QueueJob } from './queue-job.js';

export type JobRunner = (job: QueueJob) => Promise<AttemptOutcome>;

/** How long a claimed message stays leased without a renewal; renewed every third of it. */
export const DEFAULT_LEASE_MS = 15_000;
const STORE_ERROR_PAUSE_MS = 500;

/**
 * One process's consumer of one lane on a LeaseStore: claims what the store allows (the store
 * enforces the lane's cluster-wide concurrency and FIFO order), runs each message, acknowledges or
 * fails it, and renews the leases of what still runs. When the lane is empty it waits
 * `pollIntervalMs`, or less when `nudge()` says something arrived.
 */
export class PullConsumer {
  private readonly running = new Map<string, Promise<void>>();
  private closed = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private renewTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: LeaseStore,
    readonly settings: LaneSettings,
    private readonly run: JobRunner,
    private readonly logger: Logger,
    private readonly leaseMs: number = DEFAULT_LEASE_MS,
  ) {}

  start(): void {
    if (this.loop !== undefined) return;
    this.loop = this.pull();
    this.renewTimer = setInterval(() => this.renew(), Math.max(50, Math.floor(this.leaseMs / 3)));
    this.renewTimer.unref();
  }

  get inFlight(): number {
    return this.running.size;
  }

  /** Something may be waiting: claim now instead of at the next poll. */
  nudge(): void {
    this.wake?.();
  }

  private pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    }).finally(() => {
      this.wake = undefined;
    });
  }

  private async pull(): Promise<void> {
    while (!this.closed) {
      const free = this.settings.concurrency - this.running.size;
      if (free <= 0) {
        await this.pause(this.settings.pollIntervalMs);
        continue;
      }
      let jobs: QueueJob[];
      try {
        jobs = await this.store.claim(this.settings, free, this.leaseMs);
      } catch (err) {
        if (this.closed) break;
        this.logger.warn({ err, lane: this.settings.lane }, 'queue claim failed; retrying');
        await this.pause(STORE_ERROR_PAUSE_MS);
        continue;
      }
      if (jobs.length === 0) {
        await this.pause(this.settings.pollIntervalMs);
        continue;
      }
      for (const job of jobs) this.running.set(job.id, this.attempt(job));
    }
  }

  private async attempt(job: QueueJob): Promise<void> {
    try {
      let outcome: AttemptOutcome;
      try {
        outcome = await this.run(job);
      } catch (err) {
        outcome = { ok: false, error: err instanceof Error ? err.message : String(err) };
      }
      if (outcome.ok) await this.store.ack(job.lane, job.id);
      else await this.store.fail(job.lane, job.id, outcome.error);
    } catch (err) {
      // The store is unreachable: the lease runs out and the message is handed out again.
      this.logger.warn({ err, lane: job.lane, messageId: job.id }, 'queue acknowledgement failed; the message will run again');
    } finally {
      this.running.delete(job.id);
      this.wake?.();
    }
  }

  private renew(): void {
    if (this.running.size === 0) return;
    this.store.renew(this.settings.lane, [...this.running.keys()], this.leaseMs).catch((err: unknown) => {
      this.logger.warn({ err, lane: this.settings.lane }, 'queue lease renewal failed');
    });
  }

  /**
   * Stops claiming and waits up to `graceMs` for what runs; what is still running after that keeps
   * its lease until it expires and then runs again elsewhere. Idempotent.
   */
  async close(graceMs = 5_000): Promise<void> {
    this.closed = true;
    this.wake?.();
    await this.loop;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.running.values()]),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, graceMs);
      }),
    ]);
    clearTimeout(timer);
    clearInterval(this.renewTimer);
  }
}
