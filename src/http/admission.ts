/**
 * The concurrency limit (docs/http.md#concurrency): at most `limit` requests in progress; the next
 * ones wait for a slot in arrival order, as iii's does, each no longer than its own deadline. Only
 * when `queueLimit` requests are waiting already is a request refused at once (503 OVERLOADED).
 * A slot a request leaves goes straight to the oldest waiter, so a waiter is never overtaken.
 */
export type AdmissionWait = 'admitted' | 'timeout' | 'gone' | 'closing';

interface Waiter {
  resolve: (result: AdmissionWait) => void;
  timer: NodeJS.Timeout;
  /** The client is gone: the slot is not given to it. */
  gone: () => boolean;
}

export class Admission {
  private inFlight = 0;
  private readonly waiting: Waiter[] = [];
  /** Index of the oldest waiter in `waiting` (a queue without shifting the array on every hand-over). */
  private head = 0;
  private closing = false;

  constructor(
    private readonly limit: number,
    private readonly queueLimit: number,
  ) {}

  get active(): number {
    return this.inFlight;
  }

  get queued(): number {
    return this.waiting.length - this.head;
  }

  /** Takes a slot if one is free and nobody waits for one; no promise on this path. */
  tryEnter(): boolean {
    if (this.inFlight >= this.limit || this.queued > 0) return false;
    this.inFlight++;
    return true;
  }

  /** Whether a request that found no slot may wait for one. */
  canWait(): boolean {
    return !this.closing && this.queued < this.queueLimit;
  }

  /**
   * Waits for a slot until `waitMs` has passed ('timeout'). 'admitted' means the caller holds a slot
   * and must leave() it; every other result means it holds none.
   */
  wait(waitMs: number, gone: () => boolean): Promise<AdmissionWait> {
    if (waitMs <= 0) return Promise.resolve('timeout');
    return new Promise<AdmissionWait>((resolve) => {
      const waiter: Waiter = {
        resolve,
        gone,
        timer: setTimeout(() => {
          this.remove(waiter);
          resolve('timeout');
        }, waitMs),
      };
      this.waiting.push(waiter);
    });
  }

  /** A request holding a slot is done: the slot goes to the oldest waiter still there, or is freed. */
  leave(): void {
    while (this.queued > 0) {
      const next = this.takeOldest();
      clearTimeout(next.timer);
      if (next.gone()) {
        next.resolve('gone');
        continue;
      }
      next.resolve('admitted');
      return;
    }
    this.inFlight--;
  }

  /** Draining: the waiting requests are answered now (the caller says SHUTTING_DOWN), no new ones wait. */
  close(): void {
    this.closing = true;
    while (this.queued > 0) {
      const next = this.takeOldest();
      clearTimeout(next.timer);
      next.resolve('closing');
    }
  }

  private takeOldest(): Waiter {
    const next = this.waiting[this.head] as Waiter;
    this.head++;
    if (this.head > 64 && this.head * 2 > this.waiting.length) {
      this.waiting.splice(0, this.head);
      this.head = 0;
    }
    return next;
  }

  private remove(waiter: Waiter): void {
    const index = this.waiting.indexOf(waiter, this.head);
    if (index !== -1) this.waiting.splice(index, 1);
  }
}
