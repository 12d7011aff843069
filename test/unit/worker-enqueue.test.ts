import { describe, expect, it } from 'vitest';
import type { InvocationOutcome, Invoker } from '../../src/invocation/invoker.js';
import { EngineFunctions } from '../../src/workers/engine-functions.js';
import { baggageNaming, enqueueCall } from '../../src/workers/worker-enqueue.js';

const caller = { id: 'w1', recordInfo: () => undefined };
const message = { type: 'invokefunction' as const, invocation_id: 'i1', function_id: 'jobs::run', data: { n: 1 }, action: { type: 'enqueue', queue: 'q' } };

function invoker(answer: (functionId: string, data: unknown) => InvocationOutcome): Invoker & { calls: [string, unknown][] } {
  const calls: [string, unknown][] = [];
  return {
    calls,
    invoke: (functionId, data) => {
      calls.push([functionId, data]);
      return Promise.resolve(answer(functionId, data));
    },
    fire: () => false,
    has: () => false,
  };
}

describe('enqueueCall', () => {
  it('prefers the engine\'s own engine::queue::enqueue and answers the receipt it made', async () => {
    const seen: unknown[] = [];
    const fns = new EngineFunctions().register('engine::queue::enqueue', (data) => {
      seen.push(data);
      return { ok: true, value: { whatever: 1 } };
    });
    const inv = invoker(() => ({ ok: true, value: null }));
    const reply = await enqueueCall(message, caller, { invoker: inv, engineFunctions: fns, timeoutMs: 1000 });
    expect(inv.calls).toEqual([]);
    expect(reply.ok).toBe(true);
    const receipt = reply.ok ? reply.value.messageReceiptId : '';
    expect(seen).toEqual([{ queue: 'q', function_id: 'jobs::run', data: { n: 1 }, messageReceiptId: receipt, traceparent: null, baggage: 'iii.function.id=jobs%3A%3Arun' }]);
  });

  it('falls back to a worker; without one the caller gets enqueue_error naming the provider', async () => {
    const inv = invoker(() => ({ ok: false, failure: { source: 'engine', code: 'FUNCTION_UNAVAILABLE', message: 'no connected worker serves engine::queue::enqueue' } }));
    const reply = await enqueueCall(message, caller, { invoker: inv, engineFunctions: new EngineFunctions(), timeoutMs: 1000 });
    expect(inv.calls.map(([id]) => id)).toEqual(['engine::queue::enqueue']);
    expect(reply).toMatchObject({ ok: false, error: { code: 'enqueue_error' } });
    expect(reply.ok ? '' : reply.error.message).toMatch(/No queue provider.*engine::queue::enqueue/);
  });

  it('a provider\'s own error becomes enqueue_error "code: message"', async () => {
    const inv = invoker(() => ({ ok: false, failure: { source: 'worker', code: 'invocation_failed', message: 'full' } }));
    const reply = await enqueueCall(message, caller, { invoker: inv, engineFunctions: new EngineFunctions(), timeoutMs: 1000 });
    expect(reply).toEqual({ ok: false, error: { code: 'enqueue_error', message: 'invocation_failed: full' } });
  });
});

describe('baggageNaming', () => {
  it('replaces iii.function.id and keeps every other entry', () => {
    expect(baggageNaming('a=1, iii.function.id=caller,b=2', 'x::y')).toBe('a=1,b=2,iii.function.id=x%3A%3Ay');
    expect(baggageNaming(undefined, 'f')).toBe('iii.function.id=f');
  });
});
