import { afterEach, describe, expect, it, vi } from 'vitest';
import { Admission } from '../../src/http/admission.js';

describe('Admission: the concurrency limit and its waiting line', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('admits up to the limit at once, then hands each freed slot to the oldest waiter', async () => {
    const admission = new Admission(1, 2);
    expect(admission.tryEnter()).toBe(true);
    expect(admission.tryEnter()).toBe(false);
    const order: string[] = [];
    const first = admission.wait(10_000, () => false).then((r) => order.push(`first ${r}`));
    const second = admission.wait(10_000, () => false).then((r) => order.push(`second ${r}`));
    expect(admission.queued).toBe(2);
    expect(admission.canWait()).toBe(false);
    admission.leave();
    await first;
    expect(order).toEqual(['first admitted']);
    // A new request does not overtake the one still waiting.
    expect(admission.tryEnter()).toBe(false);
    admission.leave();
    await second;
    expect(order).toEqual(['first admitted', 'second admitted']);
    admission.leave();
    expect(admission.active).toBe(0);
    expect(admission.tryEnter()).toBe(true);
  });

  it('gives up on a waiter at its deadline and leaves the line', async () => {
    vi.useFakeTimers();
    const admission = new Admission(1, 1);
    admission.tryEnter();
    const waited = admission.wait(500, () => false);
    vi.advanceTimersByTime(500);
    await expect(waited).resolves.toBe('timeout');
    expect(admission.queued).toBe(0);
    admission.leave();
    expect(admission.active).toBe(0);
  });

  it('skips a waiter whose client is gone, and answers the line when closing', async () => {
    const admission = new Admission(1, 5);
    admission.tryEnter();
    const gone = admission.wait(10_000, () => true);
    const next = admission.wait(10_000, () => false);
    admission.leave();
    await expect(gone).resolves.toBe('gone');
    await expect(next).resolves.toBe('admitted');
    const closing = admission.wait(10_000, () => false);
    admission.close();
    await expect(closing).resolves.toBe('closing');
    expect(admission.canWait()).toBe(false);
  });

  it('with no waiting line refuses at once', () => {
    const admission = new Admission(1, 0);
    admission.tryEnter();
    expect(admission.canWait()).toBe(false);
  });
});
