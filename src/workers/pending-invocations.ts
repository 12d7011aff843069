import type { InvocationOutcome } from '../invocation/invoker.js';
import { engineFailure } from '../invocation/invoker.js';

interface Pending {
  functionId: string;
  /** The streaming channels whose refs the call handed the worker (an HTTP handler's two). */
  channels: readonly string[] | undefined;
  settle: (outcome: InvocationOutcome) => void;
  timer: NodeJS.Timeout;
}

/**
 * Invocations in flight on one worker connection. Each entry has a deadline timer and is settled
 * exactly once: by the worker's result, by the deadline, or by the connection going away.
 */
export class PendingInvocations {
  private readonly entries = new Map<string, Pending>();

  get size(): number {
    return this.entries.size;
  }

  add(invocationId: string, functionId: string, timeoutMs: number, channels?: readonly string[]): Promise<InvocationOutcome> {
    // Ids are engine-made uuids; a repeat would orphan the first promise, so it is a bug, loudly.
    if (this.entries.has(invocationId)) throw new Error(`invocation ${invocationId} is already pending`);
    return new Promise<InvocationOutcome>((resolve) => {
      const timer = setTimeout(() => {
        if (this.entries.delete(invocationId)) {
          resolve(engineFailure('TIMEOUT', `function ${functionId} did not answer within ${Math.round(timeoutMs)} ms`));
        }
      }, timeoutMs);
      this.entries.set(invocationId, { functionId, channels, settle: resolve, timer });
    });
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
    clearTimeout(entry.timer);
    entry.settle(outcome);
    return true;
  }

  /** Settles every entry at once with the same outcome (disconnect, shutdown). */
  failAll(outcomeFor: (functionId: string) => InvocationOutcome): number {
    const count = this.entries.size;
    for (const entry of this.entries.values()) {
      clearTimeout(entry.timer);
      entry.settle(outcomeFor(entry.functionId));
    }
    this.entries.clear();
    return count;
  }
}
