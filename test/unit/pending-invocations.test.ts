import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { InvocationOutcome } from '../../src/invocation/invoker.js';
import { engineFailure } from '../../src/invocation/invoker.js';
import { PendingInvocations } from '../../src/workers/pending-invocations.js';

/** Tracks whether a promise has settled, without awaiting it. */
function track<T>(promise: Promise<T>): { settled: () => boolean; value: () => T | undefined } {
  let done = false;
  let value: T | undefined;
  void promise.then((v) => {
    done = true;
    value = v;
  });
  return { settled: () => done, value: () => value };
}

const flush = (): Promise<void> => Promise.resolve().then(() => undefined);

describe('PendingInvocations', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('resolves an invocation with the worker outcome; its deadline then fires nothing', async () => {
    const pending = new PendingInvocations();
    const promise = pending.add('inv-1', 'api::get', 1000);
    expect(pending.size).toBe(1);
    expect(vi.getTimerCount()).toBe(1);

    const outcome: InvocationOutcome = { ok: true, value: { status_code: 200 } };
    expect(pending.resolve('inv-1', outcome)).toBe(true);
    expect(await promise).toBe(outcome);
    expect(pending.size).toBe(0);
    expect(pending.queuedDeadlines).toBe(0);
    // The connection's one timer is left armed (a lone call at a time does not touch Node's timers
    // again); when it fires it finds nothing due and does not re-arm.
    await vi.advanceTimersByTimeAsync(1000);
    expect(vi.getTimerCount()).toBe(0);
    expect(await promise).toBe(outcome);
  });

  it('keeps one timer however many calls are pending, and times each out at its own deadline', async () => {
    const pending = new PendingInvocations();
    const late = track(pending.add('late', 'f', 300));
    const early = track(pending.add('early', 'g', 100));
    const middle = track(pending.add('middle', 'h', 200));
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(99);
    expect([early.settled(), middle.settled(), late.settled()]).toEqual([false, false, false]);
    await vi.advanceTimersByTimeAsync(1);
    expect([early.settled(), middle.settled(), late.settled()]).toEqual([true, false, false]);
    expect(early.value()).toStrictEqual(engineFailure('TIMEOUT', 'function g did not answer within 100 ms'));
    // The one in the middle answers; the last still times out at its own deadline.
    expect(pending.resolve('middle', { ok: true, value: 'm' })).toBe(true);
    expect(pending.queuedDeadlines).toBe(1);
    await vi.advanceTimersByTimeAsync(199);
    expect(late.settled()).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(late.value()).toStrictEqual(engineFailure('TIMEOUT', 'function f did not answer within 300 ms'));
    expect(middle.value()).toStrictEqual({ ok: true, value: 'm' });
    expect(pending.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('times out at once (after 1 ms) when the wait is already over or not a number, as a Node timer would', async () => {
    const pending = new PendingInvocations();
    const negative = track(pending.add('a', 'f', -5));
    const nan = track(pending.add('b', 'g', Number.NaN));
    await vi.advanceTimersByTimeAsync(1);
    expect(negative.value()).toStrictEqual(engineFailure('TIMEOUT', 'function f did not answer within -5 ms'));
    expect(nan.settled()).toBe(true);
  });

  it('settles a worker failure as given', async () => {
    const pending = new PendingInvocations();
    const promise = pending.add('inv-1', 'f', 1000);
    const outcome: InvocationOutcome = {
      ok: false,
      failure: { source: 'worker', code: 'invocation_failed', message: 'boom', stacktrace: 'at x' },
    };
    pending.resolve('inv-1', outcome);
    expect(await promise).toStrictEqual(outcome);
  });

  it('returns false for a duplicate, late or unknown result and leaves the first outcome', async () => {
    const pending = new PendingInvocations();
    const promise = pending.add('inv-1', 'f', 1000);
    expect(pending.resolve('inv-1', { ok: true, value: 'first' })).toBe(true);
    expect(pending.resolve('inv-1', { ok: true, value: 'second' })).toBe(false);
    expect(pending.resolve('never-sent', { ok: true, value: 'x' })).toBe(false);
    expect(await promise).toStrictEqual({ ok: true, value: 'first' });
  });

  it('keeps invocations independent', async () => {
    const pending = new PendingInvocations();
    const a = pending.add('a', 'f', 1000);
    const b = track(pending.add('b', 'g', 1000));
    expect(pending.size).toBe(2);
    pending.resolve('a', { ok: true, value: 1 });
    expect(await a).toStrictEqual({ ok: true, value: 1 });
    await flush();
    expect(b.settled()).toBe(false);
    expect(pending.size).toBe(1);
    expect(vi.getTimerCount()).toBe(1);
  });

  it('settles TIMEOUT at the deadline, not before, and forgets the entry', async () => {
    const pending = new PendingInvocations();
    const tracked = track(pending.add('inv-1', 'api::slow', 500));
    await vi.advanceTimersByTimeAsync(499);
    expect(tracked.settled()).toBe(false);
    expect(pending.size).toBe(1);

    await vi.advanceTimersByTimeAsync(1);
    expect(tracked.settled()).toBe(true);
    expect(tracked.value()).toStrictEqual(
      engineFailure('TIMEOUT', 'function api::slow did not answer within 500 ms'),
    );
    expect(pending.size).toBe(0);
    expect(pending.resolve('inv-1', { ok: true, value: 'late' })).toBe(false);
    expect(tracked.value()).toStrictEqual({
      ok: false,
      failure: { source: 'engine', code: 'TIMEOUT', message: 'function api::slow did not answer within 500 ms' },
    });
  });

  it('rounds a fractional timeout in the message', async () => {
    const pending = new PendingInvocations();
    const promise = pending.add('inv-1', 'f', 12.6);
    await vi.advanceTimersByTimeAsync(13);
    expect(await promise).toStrictEqual(engineFailure('TIMEOUT', 'function f did not answer within 13 ms'));
  });

  it('a result after the deadline does not change the timed-out outcome', async () => {
    const pending = new PendingInvocations();
    const promise = pending.add('inv-1', 'f', 10);
    await vi.advanceTimersByTimeAsync(10);
    expect(pending.resolve('inv-1', { ok: true, value: 'late' })).toBe(false);
    expect(await promise).toStrictEqual(engineFailure('TIMEOUT', 'function f did not answer within 10 ms'));
  });

  it('failAll settles every entry with the outcome for its function and turns the timer off', async () => {
    const pending = new PendingInvocations();
    const a = pending.add('a', 'fa', 1000);
    const b = pending.add('b', 'fb', 2000);
    const c = pending.add('c', 'fa', 3000);
    pending.resolve('c', { ok: true, value: 'done' });
    expect(vi.getTimerCount()).toBe(1);

    const seen: string[] = [];
    const count = pending.failAll((functionId) => {
      seen.push(functionId);
      return engineFailure('WORKER_DISCONNECTED', `worker serving ${functionId} disconnected`);
    });
    expect(count).toBe(2);
    expect(seen).toEqual(['fa', 'fb']);
    expect(pending.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    expect(await a).toStrictEqual(engineFailure('WORKER_DISCONNECTED', 'worker serving fa disconnected'));
    expect(await b).toStrictEqual(engineFailure('WORKER_DISCONNECTED', 'worker serving fb disconnected'));
    expect(await c).toStrictEqual({ ok: true, value: 'done' });

    // Nothing fires later and nothing is left to resolve.
    await vi.advanceTimersByTimeAsync(5000);
    expect(pending.resolve('a', { ok: true, value: 'late' })).toBe(false);
    expect(await a).toStrictEqual(engineFailure('WORKER_DISCONNECTED', 'worker serving fa disconnected'));
  });

  it('failAll on an empty set returns 0 and does not call the outcome factory', () => {
    const pending = new PendingInvocations();
    let calls = 0;
    expect(
      pending.failAll(() => {
        calls++;
        return engineFailure('SHUTTING_DOWN', 'x');
      }),
    ).toBe(0);
    expect(calls).toBe(0);
  });

  it('accepts new invocations after failAll', async () => {
    const pending = new PendingInvocations();
    void pending.add('a', 'f', 100);
    pending.failAll(() => engineFailure('SHUTTING_DOWN', 'bye'));
    const next = pending.add('a', 'f', 100);
    expect(pending.size).toBe(1);
    expect(pending.resolve('a', { ok: true, value: 2 })).toBe(true);
    expect(await next).toStrictEqual({ ok: true, value: 2 });
  });
});
