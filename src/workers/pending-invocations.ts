import type { InvocationOutcome } from '../invocation/invoker.js';
import { engineFailure } from '../invocation/invoker.js';
import type { Due } from '../invocation/deadline-queue.js';
import { DeadlineQueue } from '../invocation/deadline-queue.js';

/**
 * One invocation in flight. What it holds is let go once it is settled: the entries live in a Map as
 * old as the connection, whose replaced backing tables (V8 keeps them in the old generation until a
 * full GC) still point at entries deleted since. Through `settle`, an entry held the caller's promise
 * and what it resolved with, which then outlived every scavenge (docs/performance.md, issue 26).
 */
interface Pending extends Due {
  readonly invocationId: string;
  readonly functionId: string;
  /** What the call was given, for the TIMEOUT message. */
  readonly timeoutMs: number;
  /** The streaming channels whose refs the call handed the worker (an HTTP handler's two). */
  channels: readonly string[] | undefined;
  settle: ((outcome: InvocationOutcome) => void) | undefined;
}

/**
 * Invocations in flight on one worker connection. Each entry has a deadline (one timer for all of
 * them: deadline-queue.ts) and is settled exactly once: by the worker's result, by the deadline, or
 * by the connection going away.
 */
export class PendingInvocations {
  private readonly entries = new Map<string, Pending>();
  private readonly deadlines = new DeadlineQueue<Pending>((entry) => this.expire(entry));

  get size(): number {
    return this.entries.size;
  }

  /** Entries waiting on a deadline: `size` unless a settled call was left in the queue (a leak). */
  get queuedDeadlines(): number {
    return this.deadlines.size;
  }

  add(invocationId: string, functionId: string, timeoutMs: number, channels?: readonly string[]): Promise<InvocationOutcome> {
    // Ids are engine-made uuids; a repeat would orphan the first promise, so it is a bug, loudly.
    if (this.entries.has(invocationId)) throw new Error(`invocation ${invocationId} is already pending`);
    return new Promise<InvocationOutcome>((resolve) => {
      // Due after whole milliseconds, at least one, as a Node timer of its own would have fired.
      const dueAt = performance.now() + (timeoutMs > 1 ? Math.ceil(timeoutMs) : 1);
      const entry: Pending = { invocationId, functionId, timeoutMs, channels, settle: resolve, dueAt, slot: -1 };
      this.entries.set(invocationId, entry);
      this.deadlines.add(entry);
    });
  }

  /** A call's deadline passed before its result came (a settled call left the queue). */
  private expire(entry: Pending): void {
    this.entries.delete(entry.invocationId);
    settle(entry, engineFailure('TIMEOUT', `function ${entry.functionId} did not answer within ${Math.round(entry.timeoutMs)} ms`));
  }

  /**
   * The channels the pending calls handed the worker, at most `limit` of them (the heartbeat asks
   * whether any moved data lately: a worker busy streaming may answer no ping).
   */
  channelIds(limit: number): string[] {
    const ids: string[] = [];
    for (const { channels } of this.entries.values()) {
      if (channels === undefined) continue;
      for (const id of channels) {
        if (ids.length >= limit) return ids;
        ids.push(id);
      }
    }
    return ids;
  }

  /** Returns false when no such invocation is pending here (late, duplicate or never sent). */
  resolve(invocationId: string, outcome: InvocationOutcome): boolean {
    const entry = this.entries.get(invocationId);
    if (entry === undefined) return false;
    this.entries.delete(invocationId);
    this.deadlines.remove(entry);
    settle(entry, outcome);
    return true;
  }

  /** Settles every entry at once with the same outcome (disconnect, shutdown). */
  failAll(outcomeFor: (functionId: string) => InvocationOutcome): number {
    const count = this.entries.size;
    const entries = [...this.entries.values()];
    this.entries.clear();
    this.deadlines.drain();
    for (const entry of entries) settle(entry, outcomeFor(entry.functionId));
    return count;
  }
}

/** Settles an entry once and lets go of what it held. */
function settle(entry: Pending, outcome: InvocationOutcome): void {
  const done = entry.settle;
  entry.settle = undefined;
  entry.channels = undefined;
  done?.(outcome);
}
