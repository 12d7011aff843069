import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createRootLogger } from '../../src/observability/logger.js';
import { KvFile, KV_FILE_NAME } from '../../src/modules/storage/kv-file.js';
import type { KvChange } from '../../src/modules/storage/kv-store.js';
import { MemoryKvStore, MemoryLeaseStore } from '../../src/modules/storage/memory-kv-store.js';
import { storeIdOf, storeSpecOf } from '../../src/modules/storage/store-specs.js';
import { applyUpdateOps, invalidOps } from '../../src/modules/storage/update-ops.js';
import { parseCronExpression, rfc3339 } from '../../src/modules/cron/cron-expression.js';

const silent = createRootLogger('fatal', { destination: { write: () => undefined } });

describe('update ops (iii engine/src/update_ops.rs semantics)', () => {
  it('sets, merges, increments, decrements, appends and removes; a path is one field', () => {
    const { value, errors } = applyUpdateOps({ count: 1, name: 'x', events: [], text: 'a' }, [
      { type: 'set', path: 'a.b', value: 1 },
      { type: 'merge', path: '', value: { m: true } },
      { type: 'merge', path: ['deep', 'er'], value: { z: 1 } },
      { type: 'increment', path: 'count', by: 4 },
      { type: 'decrement', path: 'missing', by: 2 },
      { type: 'append', path: 'events', value: { k: 1 } },
      { type: 'append', path: 'text', value: 'b' },
      { type: 'append', path: 'fresh', value: 'str' },
      { type: 'remove', path: 'name' },
    ]);
    expect(errors).toEqual([]);
    expect(value).toEqual({ count: 5, 'a.b': 1, m: true, deep: { er: { z: 1 } }, missing: -2, events: [{ k: 1 }], text: 'ab', fresh: 'str' });
  });

  it('reports an op that cannot apply with iii\'s code and applies the others', () => {
    const { value, errors } = applyUpdateOps({ s: 'x' }, [
      { type: 'increment', path: 's', by: 1 },
      { type: 'set', path: '__proto__', value: 1 },
      { type: 'append', path: 's', value: 5 },
      { type: 'set', path: 'ok', value: true },
    ]);
    expect(errors.map((e) => [e.op_index, e.code])).toEqual([
      [0, 'increment.not_number'],
      [1, 'set.path.proto_polluted'],
      [2, 'append.type_mismatch'],
    ]);
    expect(value).toEqual({ s: 'x', ok: true });
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
  });

  it('starts from nothing: increment at the root gives a number, set on a missing key an object', () => {
    expect(applyUpdateOps(undefined, [{ type: 'increment', path: '', by: 3 }]).value).toBe(3);
    expect(applyUpdateOps(undefined, [{ type: 'set', path: 'a', value: 1 }]).value).toEqual({ a: 1 });
    expect(applyUpdateOps(undefined, [{ type: 'append', path: '', value: 'x' }]).value).toBe('x');
  });

  it('never mutates the stored value', () => {
    const stored = { list: [1] };
    applyUpdateOps(stored, [{ type: 'append', path: 'list', value: 2 }]);
    expect(stored).toEqual({ list: [1] });
  });

  it('refuses malformed ops as a whole (deserialization_error)', () => {
    expect(invalidOps('x')).toMatch(/array/);
    expect(invalidOps([{ type: 'increment', path: 'a', by: 1.5 }])).toMatch(/integer/);
    expect(invalidOps([{ type: 'nope' }])).toMatch(/type/);
    expect(invalidOps([{ type: 'merge', value: {} }])).toBeUndefined();
  });
});

describe('MemoryKvStore', () => {
  it('answers old values, lists groups and namespaces, and tells watchers of each change in order', async () => {
    const store = new MemoryKvStore();
    const seen: KvChange[] = [];
    store.watch('state', (change) => seen.push(change));
    store.watch('other', () => {
      throw new Error('not this prefix');
    });
    expect(await store.set('state', 'g', 'k', 1)).toEqual({ old_value: undefined, new_value: 1 });
    expect(await store.set('state', 'g', 'k', 2)).toEqual({ old_value: 1, new_value: 2 });
    expect(await store.update('state', 'g', 'j', [{ type: 'set', path: 'a', value: 1 }])).toEqual({ old_value: undefined, new_value: { a: 1 } });
    expect(await store.list('state', 'g')).toEqual([2, { a: 1 }]);
    expect(await store.listGroups('state')).toEqual(['g']);
    expect(await store.listNamespaces('st')).toEqual(['state']);
    expect(await store.delete('state', 'g', 'k')).toEqual({ old_value: 2 });
    expect(await store.delete('state', 'g', 'absent')).toEqual({ old_value: undefined });
    await store.delete('state', 'g', 'j');
    expect(await store.listGroups('state')).toEqual([]);
    expect(seen.map((c) => [c.kind, c.key, c.old_value, c.new_value])).toEqual([
      ['created', 'k', undefined, 1],
      ['updated', 'k', 1, 2],
      ['created', 'j', undefined, { a: 1 }],
      ['deleted', 'k', 2, undefined],
      ['deleted', 'j', { a: 1 }, undefined],
    ]);
  });

  it('file_based: saved to the file and loaded back by a new store', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'switchyard-kv-'));
    try {
      const store = new MemoryKvStore();
      const file = new KvFile(store, dir, 100, silent);
      file.start();
      await store.set('state', 's', 'k', { v: 1 });
      file.close();
      expect(JSON.parse(await readFile(join(dir, KV_FILE_NAME), 'utf8'))).toEqual({ state: { s: { k: { v: 1 } } } });
      const again = new MemoryKvStore();
      const reopened = new KvFile(again, dir, 100, silent);
      reopened.start();
      expect(await again.get('state', 's', 'k')).toEqual({ v: 1 });
      reopened.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('MemoryLeaseStore', () => {
  it('one holder at a time until the lease expires or is released; a holder renews its own', () => {
    let now = 0;
    const leases = new MemoryLeaseStore(() => now);
    expect(leases.acquireNow('l', 'a', 100)).toBe(true);
    expect(leases.acquireNow('l', 'b', 100)).toBe(false);
    now = 50;
    expect(leases.acquireNow('l', 'a', 100)).toBe(true);
    now = 120;
    expect(leases.acquireNow('l', 'b', 100)).toBe(false);
    now = 151;
    expect(leases.acquireNow('l', 'b', 100)).toBe(true);
    leases.releaseWhere((holder) => holder === 'b');
    expect(leases.acquireNow('l', 'c', 100)).toBe(true);
  });
});

describe('store specs', () => {
  it('kv is memory (or a file) embedded, the cluster\'s Redis when distributed; redis names its URL', () => {
    expect(storeSpecOf(undefined, {})).toEqual({ kind: 'memory' });
    const file = storeSpecOf({ adapter: { name: 'kv', config: { store_method: 'file_based', file_path: '/tmp/x' } }, save_interval_ms: 200 }, {});
    expect(file).toEqual({ kind: 'memory', file: { directory: '/tmp/x', saveIntervalMs: 200 } });
    expect(storeIdOf(file)).toBe('file:/tmp/x');
    expect(storeSpecOf({ adapter: { name: 'kv' } }, { clusterRedisUrl: 'redis://c' })).toEqual({ kind: 'redis', url: 'redis://c' });
    expect(storeSpecOf({ adapter: { name: 'redis', config: { redis_url: 'redis://own' } } }, { clusterRedisUrl: 'redis://c' })).toEqual({ kind: 'redis', url: 'redis://own' });
  });
});

describe('cron expressions (iii\'s syntax: the Rust cron crate)', () => {
  const next = (expression: string, after: string): string => {
    const schedule = parseCronExpression(expression);
    if ('error' in schedule) throw new Error(schedule.error);
    return rfc3339(schedule.next(new Date(after)) as Date);
  };

  it('reads 6 and 7 fields in UTC, seconds first, weekday 1 = Sunday, shorthands', () => {
    expect(next('*/10 * * * * *', '2026-01-01T00:00:01Z')).toBe('2026-01-01T00:00:10+00:00');
    // 2026-01-01 is a Thursday: weekday 1 is the next Sunday, 2-6 the next weekday.
    expect(next('0 0 0 * * 1', '2026-01-01T12:00:00Z')).toBe('2026-01-04T00:00:00+00:00');
    expect(next('0 0 9 * * 2-6', '2026-01-02T10:00:00Z')).toBe('2026-01-05T09:00:00+00:00');
    expect(next('0 0 0 1 1 * 2028', '2026-01-01T12:00:00Z')).toBe('2028-01-01T00:00:00+00:00');
    expect(next('@hourly', '2026-01-01T00:30:00Z')).toBe('2026-01-01T01:00:00+00:00');
  });

  it('refuses 5 fields and nonsense with iii\'s message', () => {
    expect(parseCronExpression('* * * * *')).toMatchObject({ error: expect.stringMatching(/^Invalid cron expression '\* \* \* \* \*': /) });
    expect(parseCronExpression('bogus')).toHaveProperty('error');
  });

  it('formats times as chrono to_rfc3339 does', () => {
    expect(rfc3339(new Date('2026-01-01T00:00:00.000Z'))).toBe('2026-01-01T00:00:00+00:00');
    expect(rfc3339(new Date('2026-01-01T00:00:00.250Z'))).toBe('2026-01-01T00:00:00.250+00:00');
  });
});
