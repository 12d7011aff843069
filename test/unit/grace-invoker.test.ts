import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { GraceInvoker } from '../../src/invocation/grace-invoker.js';
import type { InvocationOutcome, InvokeOptions, Invoker } from '../../src/invocation/invoker.js';
import { engineFailure } from '../../src/invocation/invoker.js';
import type { OwnerSnapshot } from '../../src/routing/registrations.js';
import { RouteTable } from '../../src/routing/route-table.js';

/** An inner invoker whose served functions the test switches on and off. */
class FakeInvoker implements Invoker {
  readonly served = new Set<string>();
  calls = 0;
  /** When set, the next invoke answers this (e.g. FUNCTION_UNAVAILABLE: the owner just left). */
  nextOutcome: InvocationOutcome | undefined;

  invoke(functionId: string): Promise<InvocationOutcome> {
    this.calls++;
    const forced = this.nextOutcome;
    this.nextOutcome = undefined;
    if (forced !== undefined) return Promise.resolve(forced);
    if (!this.served.has(functionId)) return Promise.resolve(engineFailure('FUNCTION_UNAVAILABLE', 'none'));
    return Promise.resolve({ ok: true, value: `ran ${functionId}` });
  }

  fire(functionId: string): boolean {
    return this.served.has(functionId);
  }

  has(functionId: string): boolean {
    return this.served.has(functionId);
  }
}

const departedSnapshot = (version: number, functionIds: string[]): OwnerSnapshot => ({
  ownerId: 'peer',
  version,
  functions: [],
  triggers: [],
  departed: functionIds.length === 0 ? [] : [{ workerId: 'w-gone', functionIds, triggers: [] }],
});

function setup(graceMs: number) {
  const table = new RouteTable(false);
  const inner = new FakeInvoker();
  const waits: { outcome: string; ms: number }[] = [];
  const invoker = new GraceInvoker(inner, table, graceMs, { waited: (outcome, ms) => waits.push({ outcome, ms }) });
  const options = (deadlineMs = 30_000): InvokeOptions => ({ deadline: performance.now() + deadlineMs });
  return { table, inner, invoker, waits, options };
}

const failureCode = (outcome: InvocationOutcome): string | undefined => (outcome.ok ? undefined : outcome.failure.code);

afterEach(() => {
  vi.useRealTimers();
});

describe('GraceInvoker', () => {
  it('passes calls straight through when the function is served', async () => {
    const { inner, invoker, options, waits } = setup(5000);
    inner.served.add('f');
    expect(await invoker.invoke('f', {}, options())).toEqual({ ok: true, value: 'ran f' });
    expect(waits).toEqual([]);
  });

  it('fails at once when no worker serves the function and none departed with it', async () => {
    const { invoker, options, waits } = setup(5000);
    const started = performance.now();
    expect(failureCode(await invoker.invoke('f', {}, options()))).toBe('FUNCTION_UNAVAILABLE');
    expect(performance.now() - started).toBeLessThan(100);
    expect(waits).toEqual([]);
  });

  it('waits for a departed function and runs it once a worker registers it again', async () => {
    const { table, inner, invoker, options, waits } = setup(5000);
    table.applySnapshot(departedSnapshot(1, ['f']));
    table.current();
    const pending = invoker.invoke('f', {}, options());
    // One turn of the event loop: the call is parked, not sent.
    await new Promise((r) => setImmediate(r));
    expect(inner.calls).toBe(0);
    inner.served.add('f');
    table.applySnapshot(departedSnapshot(2, []));
    expect(await pending).toEqual({ ok: true, value: 'ran f' });
    expect(waits.map((w) => w.outcome)).toEqual(['served']);
    expect(inner.calls).toBe(1);
  });

  it('answers 503-style FUNCTION_UNAVAILABLE when the grace ends first', async () => {
    const { table, invoker, options, waits } = setup(150);
    table.applySnapshot(departedSnapshot(1, ['f']));
    table.current();
    const started = performance.now();
    const outcome = await invoker.invoke('f', {}, options());
    expect(failureCode(outcome)).toBe('FUNCTION_UNAVAILABLE');
    expect(outcome.ok ? '' : outcome.failure.message).toContain('reconnect grace of 150 ms');
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    expect(waits.map((w) => w.outcome)).toEqual(['expired']);
  });

  it('answers TIMEOUT when the request deadline ends before the grace', async () => {
    const { table, invoker, options, waits } = setup(5000);
    table.applySnapshot(departedSnapshot(1, ['f']));
    table.current();
    expect(failureCode(await invoker.invoke('f', {}, options(100)))).toBe('TIMEOUT');
    expect(waits.map((w) => w.outcome)).toEqual(['deadline']);
  });

  it('stops waiting as soon as the departed worker expires', async () => {
    const { table, invoker, options, waits } = setup(5000);
    table.applySnapshot(departedSnapshot(1, ['f']));
    table.current();
    const started = performance.now();
    const pending = invoker.invoke('f', {}, options());
    setTimeout(() => table.applySnapshot(departedSnapshot(2, [])), 50);
    expect(failureCode(await pending)).toBe('FUNCTION_UNAVAILABLE');
    expect(performance.now() - started).toBeLessThan(1000);
    expect(waits.map((w) => w.outcome)).toEqual(['expired']);
  });

  it('retries a call that was not dispatched because its owner had just left', async () => {
    const { inner, invoker, options } = setup(5000);
    inner.served.add('f');
    inner.nextOutcome = engineFailure('FUNCTION_UNAVAILABLE', 'worker left before the call was sent');
    expect(await invoker.invoke('f', {}, options())).toEqual({ ok: true, value: 'ran f' });
    expect(inner.calls).toBe(2);
  });

  it('never retries a dispatched call that failed', async () => {
    const { inner, invoker, options } = setup(5000);
    inner.served.add('f');
    inner.nextOutcome = engineFailure('WORKER_DISCONNECTED', 'worker died mid-call');
    expect(failureCode(await invoker.invoke('f', {}, options()))).toBe('WORKER_DISCONNECTED');
    expect(inner.calls).toBe(1);
  });

  it('with a grace of 0 never waits', async () => {
    const { table, invoker, options } = setup(0);
    table.applySnapshot(departedSnapshot(1, ['f']));
    table.current();
    const started = performance.now();
    expect(failureCode(await invoker.invoke('f', {}, options()))).toBe('FUNCTION_UNAVAILABLE');
    expect(performance.now() - started).toBeLessThan(100);
  });
});
