/**
 * What a Redis bus receiver remembers to refuse replays (docs/security.md#between-nodes): each
 * sender's highest sequence number and which of the last WINDOW below it were seen, and how old a
 * message may be. Plain logic over data (time is passed in).
 */
export const BUS_MAX_AGE_MS = 60_000;
/** Messages of one sender may arrive this far out of order and still be accepted once each. */
const WINDOW = 64;
/** Senders not heard from for this long are forgotten: anything of theirs is stale by then. */
const FORGET_AFTER_MS = 2 * BUS_MAX_AGE_MS;
const PRUNE_EVERY = 1024;

interface SenderState {
  highest: number;
  /** Sequence numbers seen in (highest - WINDOW, highest]. */
  seen: Set<number>;
  lastMs: number;
}

export type ReplayVerdict = 'ok' | 'stale' | 'replayed';

export class ReplayGuard {
  private readonly senders = new Map<string, SenderState>();
  private checks = 0;

  constructor(private readonly maxAgeMs = BUS_MAX_AGE_MS) {}

  get size(): number {
    return this.senders.size;
  }

  /** Decides on one message (and remembers it when accepted). `sentMs` is the sender's wall clock. */
  check(sender: string, seq: number, sentMs: number, nowMs: number): ReplayVerdict {
    if (++this.checks % PRUNE_EVERY === 0) this.prune(nowMs);
    if (!(Math.abs(nowMs - sentMs) <= this.maxAgeMs)) return 'stale';
    const state = this.senders.get(sender);
    if (state === undefined) {
      this.senders.set(sender, { highest: seq, seen: new Set([seq]), lastMs: nowMs });
      return 'ok';
    }
    if (seq <= state.highest - WINDOW || state.seen.has(seq)) return 'replayed';
    state.seen.add(seq);
    state.lastMs = nowMs;
    if (seq > state.highest) {
      state.highest = seq;
      for (const old of state.seen) if (old <= seq - WINDOW) state.seen.delete(old);
    }
    return 'ok';
  }

  private prune(nowMs: number): void {
    for (const [sender, state] of this.senders) if (nowMs - state.lastMs > FORGET_AFTER_MS) this.senders.delete(sender);
  }
}
