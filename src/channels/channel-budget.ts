/**
 * The bytes every channel of one process holds, together (docs/security.md#channels): items queued
 * in channels plus items handed to a reader's socket that have not been flushed to the kernel yet.
 * Past `maxBytes` no channel queues more than the item in hand: a writer whose reader has not taken
 * its last item is paused (back-pressure), so a tenant with many channels nobody reads cannot grow the
 * process, while channels whose readers keep up go on, one item in flight at a time.
 */
export class ChannelBudget {
  private heldBytes = 0;

  constructor(readonly maxBytes: number = Number.POSITIVE_INFINITY) {}

  get held(): number {
    return this.heldBytes;
  }

  get full(): boolean {
    return this.heldBytes >= this.maxBytes;
  }

  take(bytes: number): void {
    this.heldBytes += bytes;
  }

  give(bytes: number): void {
    this.heldBytes = Math.max(0, this.heldBytes - bytes);
  }
}

/** A budget without a bound (unit tests, relays built without one). */
export const UNBOUNDED_BUDGET = new ChannelBudget();
