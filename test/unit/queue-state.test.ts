import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { EmbeddedQueueStore } from '../../src/modules/queue/embedded-store.js';
import type { LaneSettings, QueueJob } from '../../src/modules/queue/queue-job.js';
import { QueueState } from '../../src/modules/queue/queue-state.js';
import { leaseStoreCases } from '../support/lease-store-cases.js';

const logger = pino({ level: 'silent' });
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'sy-queue-'));
  dirs.push(dir);
  return dir;
}

leaseStoreCases('embedded (memory)', () => Promise.resolve(EmbeddedQueueStore.open(undefined, logger)));
leaseStoreCases('embedded (file)', () => Promise.resolve(EmbeddedQueueStore.open(tempDir(), logger)));

const lane: LaneSettings = { lane: 'q', concurrency: 4, fifo: true, maxAttempts: 3, backoffMs: 100, pollIntervalMs: 10 };
const job = (id: string, group?: string): QueueJob => ({
  id,
  lane: 'q',
  functionId: 'f',
  data: { id },
  attemptsMade: 0,
  maxAttempts: 3,
  backoffMs: 100,
  createdAt: 0,
  ...(group === undefined ? {} : { group }),
});

describe('QueueState', () => {
  it('waits out the exponential backoff on the injected clock: 100, then 200 ms', () => {
    let now = 1_000;
    const state = new QueueState(() => now);
    state.enqueue(job('a', 'G'));
    state.claim(lane, 1, 10_000);
    expect(state.fail('q', 'a', 'x')).toBe('retry');
    now += 99;
    expect(state.claim(lane, 1, 10_000)).toEqual([]);
    now += 1;
    expect(state.claim(lane, 1, 10_000).map((j) => j.id)).toEqual(['a']);
    expect(state.fail('q', 'a', 'x')).toBe('retry');
    now += 199;
    expect(state.claim(lane, 1, 10_000)).toEqual([]);
    now += 1;
    expect(state.claim(lane, 1, 10_000).map((j) => j.id)).toEqual(['a']);
    expect(state.fail('q', 'a', 'x')).toBe('dead');
  });

  it('standard messages (no group) run in parallel up to the concurrency', () => {
    const state = new QueueState();
    for (let i = 0; i < 6; i++) state.enqueue(job(`s${i}`));
    expect(state.claim({ ...lane, fifo: false }, 10, 10_000).map((j) => j.id)).toEqual(['s0', 's1', 's2', 's3']);
  });

  it('replays its records into the same state, groups in order, leases dropped', () => {
    const records: unknown[] = [];
    const state = QueueState.replay([], Date.now, (r) => records.push(structuredClone(r)));
    for (let i = 0; i < 3; i++) state.enqueue(job(`a${i}`, 'A'));
    state.enqueue(job('b0', 'B'));
    state.claim(lane, 10, 10_000);
    state.ack('q', 'a0');
    state.fail('q', 'b0', 'boom');
    const copy = QueueState.replay(records as never);
    expect(copy.stats('q')).toMatchObject({ depth: 3, inFlight: 0, retried: 1 });
    expect(copy.claim(lane, 10, 10_000).map((j) => [j.id, j.attemptsMade])).toEqual([
      ['a1', 0],
      ['b0', 1],
    ]);
  });
});

describe('EmbeddedQueueStore on disk', () => {
  it('survives a restart: messages, their order, attempts, dead letters and counters', async () => {
    const dir = tempDir();
    const first = EmbeddedQueueStore.open(dir, logger);
    for (let i = 0; i < 5; i++) await first.enqueue(job(`m${i}`, 'G'));
    await first.claim({ ...lane, maxAttempts: 1 }, 1, 10_000);
    await first.ack('q', 'm0');
    await first.claim(lane, 1, 10_000);
    await first.fail('q', 'm1', 'boom');
    // m2 is running when the engine stops: it runs again after the restart.
    await first.claim({ ...lane }, 1, 60_000).catch(() => undefined);
    await first.close();

    const second = EmbeddedQueueStore.open(dir, logger);
    expect(await second.stats('q')).toMatchObject({ depth: 4, inFlight: 0, retried: 1 });
    const order: string[] = [];
    for (let i = 0; i < 4; i++) {
      const [next] = await second.claim(lane, 1, 10_000);
      if (next === undefined) break;
      order.push(`${next.id}:${next.attemptsMade}`);
      await second.ack('q', next.id);
    }
    expect(order).toEqual(['m1:1', 'm2:0', 'm3:0', 'm4:0']);
    await second.close();
  });

  it('skips a torn last line (killed mid-write) and compacts the journal on open', async () => {
    const dir = tempDir();
    const first = EmbeddedQueueStore.open(dir, logger);
    await first.enqueue(job('kept', 'G'));
    await first.enqueue(job('gone', 'G'));
    await first.claim(lane, 1, 10_000);
    await first.ack('q', 'kept');
    await first.close();
    appendFileSync(join(dir, 'queue.journal'), '{"op":"put","job":{"id":"to');
    const second = EmbeddedQueueStore.open(dir, logger);
    expect((await second.stats('q')).depth).toBe(1);
    await second.close();
    const lines = readFileSync(join(dir, 'queue.journal'), 'utf8').trim().split('\n');
    expect(lines).toHaveLength(1);
  });
});
