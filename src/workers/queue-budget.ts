/**
 * What the engine has queued towards the workers of one listener in one process, together
 * (`max_listener_queued_bytes`, docs/security.md#connections). `max_queued_bytes` bounds one worker
 * that does not read; this bounds the sum, so many such workers (a tenant's connections that call
 * each other's functions and never read the calls) cannot grow the process with their number. Past
 * `maxBytes` the worker with the most queued is closed, as max_queued_bytes closes one.
 */
export interface QueueHolder {
  /** Bytes queued towards it now (its socket's bufferedAmount). */
  queuedBytes(): number;
  /** Closes it for the process budget (once). */
  evict(queued: number, total: number): void;
}

export class QueueBudget {
  private readonly queued = new Map<QueueHolder, number>();
  private total = 0;

  constructor(readonly maxBytes: number) {}

  /** Bytes counted at the holders' last sends (queues drain without telling: this may be above the truth). */
  get held(): number {
    return this.total;
  }

  /** A holder's queue after a send. Past the budget, every count is refreshed and the largest closed until under it. */
  report(holder: QueueHolder, bytes: number): void {
    this.total += bytes - (this.queued.get(holder) ?? 0);
    this.queued.set(holder, bytes);
    if (this.total <= this.maxBytes) return;
    this.total = 0;
    for (const member of this.queued.keys()) {
      const now = member.queuedBytes();
      this.queued.set(member, now);
      this.total += now;
    }
    while (this.total > this.maxBytes) {
      let largest: QueueHolder | undefined;
      let largestBytes = 0;
      for (const [member, held] of this.queued) {
        if (held > largestBytes) {
          largest = member;
          largestBytes = held;
        }
      }
      if (largest === undefined) break;
      const before = this.total;
      this.release(largest);
      largest.evict(largestBytes, before);
    }
  }

  /** The holder is gone: its queue no longer counts. */
  release(holder: QueueHolder): void {
    const held = this.queued.get(holder);
    if (held === undefined) return;
    this.queued.delete(holder);
    this.total -= held;
  }
}
