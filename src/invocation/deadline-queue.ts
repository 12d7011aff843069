/** What a DeadlineQueue holds: when the entry is due and where it sits in the queue (-1: not queued). */
export interface Due {
  /** `performance.now()` time at which the entry expires (a number, never NaN: callers check). */
  dueAt: number;
  /** The entry's place in the queue's heap; kept by the queue. */
  slot: number;
}

/** The longest delay Node's timers take as given (2^31 - 1 ms). */
const MAX_DELAY_MS = 2_147_483_647;

/**
 * Entries that expire at their own deadlines, under one Node timer per queue (docs/performance.md,
 * "The pending calls' deadlines"). A timer per entry made Node build and drop its timer list for the
 * duration on every call whenever one call at a time was in flight, and switch the loop's reference
 * to its timers on and off: several µs of every lone request. Here an entry is added to and removed
 * from a binary heap ordered by `dueAt`, and the one timer is armed for the earliest deadline; a
 * removal never touches the timer: when it fires with nothing due it re-arms for the earliest entry
 * left, or stays off when none is. The timer is unref'd: pending calls never hold a process open by
 * themselves (their connection does).
 */
export class DeadlineQueue<E extends Due> {
  private readonly heap: E[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** When the timer fires; Infinity while it is off. */
  private armedFor = Infinity;

  constructor(private readonly expire: (entry: E) => void) {}

  get size(): number {
    return this.heap.length;
  }

  /** Queues `entry`, due at `entry.dueAt`. */
  add(entry: E): void {
    entry.slot = this.heap.length;
    this.heap.push(entry);
    this.up(entry.slot);
    if (entry.dueAt < this.armedFor) this.arm(entry.dueAt);
  }

  /** Takes `entry` out; it will not expire. Does nothing for an entry not queued. */
  remove(entry: E): void {
    const at = entry.slot;
    if (at < 0 || this.heap[at] !== entry) return;
    entry.slot = -1;
    const last = this.heap.pop() as E;
    if (last === entry) return;
    this.heap[at] = last;
    last.slot = at;
    this.down(at);
    this.up(last.slot);
  }

  /** Takes every entry out and turns the timer off; returns them in no particular order. */
  drain(): E[] {
    const all = this.heap.splice(0);
    for (const entry of all) entry.slot = -1;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.armedFor = Infinity;
    return all;
  }

  private arm(dueAt: number): void {
    clearTimeout(this.timer);
    this.armedFor = dueAt;
    // Node fires at whole milliseconds of its loop clock; an entry found not yet due re-arms for the
    // rest. Node turns a delay past its limit into 1 ms, so a far deadline is reached in steps.
    this.timer = setTimeout(this.fire, Math.min(MAX_DELAY_MS, Math.max(1, Math.ceil(dueAt - performance.now()))));
    this.timer.unref();
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    this.armedFor = Infinity;
    const now = performance.now();
    // Each entry is out of the heap before its callback runs, so a callback may add or remove others.
    for (let first = this.heap[0]; first !== undefined && first.dueAt <= now; first = this.heap[0]) {
      this.remove(first);
      this.expire(first);
    }
    const next = this.heap[0];
    if (next !== undefined && next.dueAt < this.armedFor) this.arm(next.dueAt);
  };

  private up(at: number): void {
    const heap = this.heap;
    const entry = heap[at] as E;
    while (at > 0) {
      const parentAt = (at - 1) >> 1;
      const parent = heap[parentAt] as E;
      if (parent.dueAt <= entry.dueAt) break;
      heap[at] = parent;
      parent.slot = at;
      at = parentAt;
    }
    heap[at] = entry;
    entry.slot = at;
  }

  private down(at: number): void {
    const heap = this.heap;
    const entry = heap[at] as E;
    const count = heap.length;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= count) break;
      const right = left + 1;
      const child = right < count && (heap[right] as E).dueAt < (heap[left] as E).dueAt ? right : left;
      const smaller = heap[child] as E;
      if (smaller.dueAt >= entry.dueAt) break;
      heap[at] = smaller;
      smaller.slot = at;
      at = child;
    }
    heap[at] = entry;
    entry.slot = at;
  }
}
