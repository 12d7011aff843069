import { describe, expect, it } from 'vitest';
import type { QueueHolder } from '../../src/workers/queue-budget.js';
import { QueueBudget } from '../../src/workers/queue-budget.js';

/** A worker's queue: `bytes` is what its socket holds now (it drains without telling the budget). */
function holder(name: string, evicted: string[]): QueueHolder & { bytes: number } {
  return {
    bytes: 0,
    queuedBytes() {
      return this.bytes;
    },
    evict() {
      evicted.push(name);
    },
  };
}

describe('QueueBudget', () => {
  it('sums what each holder reported at its last send', () => {
    const budget = new QueueBudget(100);
    const evicted: string[] = [];
    const a = holder('a', evicted);
    const b = holder('b', evicted);
    budget.report(a, 30);
    budget.report(b, 40);
    budget.report(a, 10);
    expect(budget.held).toBe(50);
    budget.release(b);
    expect(budget.held).toBe(10);
    budget.release(b);
    expect(budget.held).toBe(10);
    expect(evicted).toEqual([]);
  });

  it('past the budget, refreshes every count first: queues that drained meanwhile close nobody', () => {
    const budget = new QueueBudget(100);
    const evicted: string[] = [];
    const a = holder('a', evicted);
    const b = holder('b', evicted);
    budget.report(a, 90);
    a.bytes = 5; // drained since its last send
    b.bytes = 60;
    budget.report(b, 60);
    expect(evicted).toEqual([]);
    expect(budget.held).toBe(65);
  });

  it('past the budget, closes the largest queues until under it, and forgets them', () => {
    const budget = new QueueBudget(100);
    const evicted: string[] = [];
    const a = holder('a', evicted);
    const b = holder('b', evicted);
    const c = holder('c', evicted);
    a.bytes = 50;
    budget.report(a, 50);
    b.bytes = 40;
    budget.report(b, 40);
    c.bytes = 45;
    budget.report(c, 45);
    expect(evicted).toEqual(['a']);
    expect(budget.held).toBe(85);
    // The one sending may be the one closed.
    c.bytes = 200;
    budget.report(c, 200);
    expect(evicted).toEqual(['a', 'c']);
    expect(budget.held).toBe(40);
  });
});
