import { describe, expect, it } from 'vitest';
import type { LeaseStore } from '../../src/modules/queue/lease-store.js';
import type { LaneSettings, QueueJob } from '../../src/modules/queue/queue-job.js';

/**
 * One conformance suite for every LeaseStore (the embedded store, the Redis FIFO store): order within
 * a group, groups in parallel, the lane's concurrency, retries with backoff, dead letters and their
 * functions, lease expiry. `make` returns a fresh, empty store per test.
 */
export function leaseStoreCases(name: string, make: () => Promise<LeaseStore>): void {
  let n = 0;
  const lane = (over: Partial<LaneSettings> = {}): LaneSettings => ({
    lane: `lane-${++n}-${Math.random().toString(36).slice(2, 8)}`,
    concurrency: 10,
    fifo: true,
    maxAttempts: 3,
    backoffMs: 20,
    pollIntervalMs: 10,
    ...over,
  });
  const job = (settings: LaneSettings, id: string, group: string, data: unknown = { id }): QueueJob => ({
    id,
    lane: settings.lane,
    functionId: 'f',
    data,
    attemptsMade: 0,
    maxAttempts: settings.maxAttempts,
    backoffMs: settings.backoffMs,
    group,
    createdAt: Date.now(),
  });
  const claimUntil = async (store: LeaseStore, settings: LaneSettings, max: number, want: number, leaseMs = 10_000): Promise<QueueJob[]> => {
    const deadline = Date.now() + 5_000;
    const got: QueueJob[] = [];
    while (got.length < want && Date.now() < deadline) {
      got.push(...(await store.claim(settings, max - got.length, leaseMs)));
      if (got.length < want) await new Promise((r) => setTimeout(r, 10));
    }
    return got;
  };

  describe(`${name}: LeaseStore conformance`, () => {
    it('hands a group out in order, one at a time, while other groups run in parallel', async () => {
      const store = await make();
      const s = lane();
      for (let i = 0; i < 3; i++) await store.enqueue(job(s, `a${i}`, 'A'));
      for (let i = 0; i < 2; i++) await store.enqueue(job(s, `b${i}`, 'B'));
      const first = await store.claim(s, 10, 10_000);
      expect(first.map((j) => j.id).sort()).toEqual(['a0', 'b0']);
      expect(await store.claim(s, 10, 10_000)).toEqual([]);
      expect(await store.ack(s.lane, 'a0')).toBe(true);
      expect((await store.claim(s, 10, 10_000)).map((j) => j.id)).toEqual(['a1']);
      expect((await store.stats(s.lane)).inFlight).toBe(2);
      expect((await store.stats(s.lane)).depth).toBe(4);
      await store.close();
    });

    it('keeps payloads exactly (large integers, empty arrays, nested objects)', async () => {
      const store = await make();
      const s = lane();
      const data = { big: Number.MAX_SAFE_INTEGER, list: [], nested: { empty: {}, text: 'é ✓' } };
      await store.enqueue(job(s, 'x', 'G', data));
      const [got] = await store.claim(s, 1, 10_000);
      expect(got?.data).toStrictEqual(data);
      expect(await store.fail(s.lane, 'x', 'boom')).toBe('retry');
      const [again] = await claimUntil(store, s, 1, 1);
      expect(again?.data).toStrictEqual(data);
      expect(again?.attemptsMade).toBe(1);
      await store.close();
    });

    it('never leases more than the lane concurrency at once', async () => {
      const store = await make();
      const s = lane({ concurrency: 2 });
      for (let i = 0; i < 5; i++) await store.enqueue(job(s, `m${i}`, `g${i}`));
      expect((await store.claim(s, 10, 10_000)).length).toBe(2);
      expect((await store.claim(s, 10, 10_000)).length).toBe(0);
      await store.ack(s.lane, 'm0');
      expect((await store.claim(s, 10, 10_000)).map((j) => j.id)).toEqual(['m2']);
      await store.close();
    });

    it('retries a failed head after its backoff, before the rest of its group, then dead-letters it', async () => {
      const store = await make();
      const s = lane({ maxAttempts: 2, backoffMs: 30 });
      await store.enqueue(job(s, 'h', 'G'));
      await store.enqueue(job(s, 't', 'G'));
      await store.claim(s, 10, 10_000);
      expect(await store.fail(s.lane, 'h', 'first')).toBe('retry');
      expect(await store.claim(s, 10, 10_000)).toEqual([]);
      const retried = await claimUntil(store, s, 10, 1);
      expect(retried.map((j) => j.id)).toEqual(['h']);
      expect(await store.fail(s.lane, 'h', 'second')).toBe('dead');
      expect((await store.claim(s, 10, 10_000)).map((j) => j.id)).toEqual(['t']);
      const letters = await store.deadLetters(s.lane, 0, 10);
      expect(letters).toHaveLength(1);
      expect(letters[0]).toMatchObject({ id: 'h', payload: { id: 'h' }, error: 'second', retries: 2 });
      const stats = await store.stats(s.lane);
      expect(stats).toMatchObject({ deadLetters: 1, retried: 1, deadLettered: 1 });
      await store.close();
    });

    it('redrives all dead letters, one, or discards one', async () => {
      const store = await make();
      const s = lane({ maxAttempts: 1 });
      for (const id of ['d1', 'd2', 'd3']) {
        await store.enqueue(job(s, id, id));
        await store.claim(s, 1, 10_000);
        expect(await store.fail(s.lane, id, 'no')).toBe('dead');
      }
      expect((await store.deadLetters(s.lane, 0, 10)).map((l) => l.id)).toEqual(['d3', 'd2', 'd1']);
      expect((await store.deadLetters(s.lane, 1, 1)).map((l) => l.id)).toEqual(['d2']);
      expect(await store.discard(s.lane, 'd2')).toBe(true);
      expect(await store.discard(s.lane, 'd2')).toBe(false);
      expect(await store.redriveOne(s.lane, 'd3')).toBe(true);
      expect(await store.redriveOne(s.lane, 'nope')).toBe(false);
      const back = await store.claim(s, 10, 10_000);
      expect(back.map((j) => j.id)).toEqual(['d3']);
      expect(back[0]?.attemptsMade).toBe(0);
      await store.ack(s.lane, 'd3');
      expect(await store.redrive(s.lane)).toBe(1);
      expect((await store.claim(s, 10, 10_000)).map((j) => j.id)).toEqual(['d1']);
      expect((await store.stats(s.lane)).deadLetters).toBe(0);
      await store.close();
    });

    it('hands a message out again when its lease expires, counting the attempt, and refuses the late ack', async () => {
      const store = await make();
      const s = lane({ backoffMs: 0 });
      await store.enqueue(job(s, 'slow', 'G'));
      await store.claim(s, 1, 50);
      const again = await claimUntil(store, s, 1, 1, 10_000);
      expect(again.map((j) => j.id)).toEqual(['slow']);
      expect(again[0]?.attemptsMade).toBe(1);
      await store.ack(s.lane, 'slow');
      expect(await store.ack(s.lane, 'slow')).toBe(false);
      expect((await store.stats(s.lane)).depth).toBe(0);
      await store.close();
    });

    it('renewing a lease keeps the message with its holder', async () => {
      const store = await make();
      const s = lane();
      await store.enqueue(job(s, 'r', 'G'));
      await store.claim(s, 1, 300);
      for (let i = 0; i < 4; i++) {
        await new Promise((r) => setTimeout(r, 100));
        await store.renew(s.lane, ['r'], 300);
      }
      expect(await store.claim(s, 1, 300)).toEqual([]);
      expect(await store.ack(s.lane, 'r')).toBe(true);
      await store.close();
    });

    it('keeps one copy of a message enqueued twice with the same id', async () => {
      const store = await make();
      const s = lane();
      await store.enqueue(job(s, 'same', 'G'));
      await store.enqueue(job(s, 'same', 'G'));
      expect((await store.stats(s.lane)).depth).toBe(1);
      expect(await store.lanes()).toContain(s.lane);
      await store.close();
    });
  });
}
