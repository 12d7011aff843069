import { performance } from 'node:perf_hooks';
import type { RouteTable } from '../routing/route-table.js';
import type { InvocationOutcome, InvokeOptions, Invoker } from './invoker.js';
import { engineFailure } from './invoker.js';

/** Retry pacing for a function that is listed but could not take the call (its owner just left). */
const FIRST_RETRY_MS = 20;
const MAX_RETRY_MS = 500;

export interface GraceObserver {
  /** A call that had to wait ended: served (a worker came back) or not. */
  waited(outcome: 'served' | 'expired' | 'deadline', waitedMs: number): void;
}

const isUnavailable = (outcome: InvocationOutcome): boolean =>
  !outcome.ok && outcome.failure.source === 'engine' && outcome.failure.code === 'FUNCTION_UNAVAILABLE';

/**
 * The reconnect grace (docs/reliability.md#reconnect-grace). A call whose function no connected worker
 * serves, while a worker that served it departed less than the grace ago, waits (within its deadline,
 * at most `graceMs`) for a worker to register it again, then runs there. A call that could not be
 * dispatched (FUNCTION_UNAVAILABLE: it ran nowhere) is retried the same way, so a worker leaving
 * between the lookup and the send costs a retry, not an error. Nothing is retried once dispatched.
 */
export class GraceInvoker implements Invoker {
  private readonly wakers = new Set<() => void>();

  constructor(
    private readonly inner: Invoker,
    private readonly table: RouteTable,
    private readonly graceMs: number,
    private readonly observer?: GraceObserver,
  ) {
    table.onChange(() => {
      if (this.wakers.size === 0) return;
      const woken = [...this.wakers];
      this.wakers.clear();
      for (const wake of woken) wake();
    });
  }

  invoke(functionId: string, data: unknown, options: InvokeOptions): Promise<InvocationOutcome> {
    if (this.graceMs === 0) return this.inner.invoke(functionId, data, options);
    if (this.inner.has(functionId)) {
      const first = this.inner.invoke(functionId, data, options);
      return first.then((outcome) => (isUnavailable(outcome) ? this.waitAndRetry(functionId, data, options, outcome) : outcome));
    }
    if (!this.awaited(functionId)) return this.inner.invoke(functionId, data, options);
    return this.waitAndRetry(functionId, data, options, undefined);
  }

  fire(functionId: string, data: unknown, metadata?: unknown): boolean {
    return this.inner.fire(functionId, data, metadata);
  }

  has(functionId: string): boolean {
    return this.inner.has(functionId);
  }

  private awaited(functionId: string): boolean {
    return this.table.current().awaitedFunctions.has(functionId);
  }

  private async waitAndRetry(
    functionId: string,
    data: unknown,
    options: InvokeOptions,
    last: InvocationOutcome | undefined,
  ): Promise<InvocationOutcome> {
    const started = performance.now();
    const graceEnd = started + this.graceMs;
    const end = Math.min(graceEnd, options.deadline);
    let retryMs = FIRST_RETRY_MS;
    for (;;) {
      const served = this.inner.has(functionId);
      if (!served && !this.awaited(functionId)) {
        // Nobody is expected back: answer now with what we know.
        this.observer?.waited('expired', performance.now() - started);
        return last ?? engineFailure('FUNCTION_UNAVAILABLE', `no connected worker serves ${functionId}`);
      }
      const now = performance.now();
      if (now >= end) {
        const byDeadline = options.deadline <= graceEnd;
        this.observer?.waited(byDeadline ? 'deadline' : 'expired', now - started);
        return byDeadline
          ? engineFailure('TIMEOUT', `deadline passed while waiting for a worker to serve ${functionId}`)
          : engineFailure(
              'FUNCTION_UNAVAILABLE',
              `no worker served ${functionId} again within the reconnect grace of ${this.graceMs} ms`,
            );
      }
      // Listed somewhere but refused (its owner just left): retry soon; otherwise wait for a change.
      await this.nextChange(served ? Math.min(end, now + retryMs) : end);
      if (served) retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
      if (!this.inner.has(functionId)) continue;
      const outcome = await this.inner.invoke(functionId, data, options);
      if (!isUnavailable(outcome)) {
        this.observer?.waited('served', performance.now() - started);
        return outcome;
      }
      last = outcome;
    }
  }

  /** Resolves on the next table change or at `until` (performance.now() clock), whichever is first. */
  private nextChange(until: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.wakers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, Math.max(0, until - performance.now()));
      this.wakers.add(wake);
    });
  }
}
