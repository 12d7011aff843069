// Bus protocol 2 (docs/scale.md): a peer's change travels as a delta on its version chain; a receiver
// applies what follows the version it holds, ignores duplicates, and resyncs on a gap.
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { SnapshotChecker, checkSnapshot } from '../../src/bus/snapshot-check.js';
import type { WireDelta } from '../../src/bus/wire-delta.js';
import { PeerChains, diffSnapshots, isDelta } from '../../src/bus/wire-delta.js';
import type { WireSnapshot, WireTrigger } from '../../src/bus/wire-snapshot.js';
import { RouteTable } from '../../src/routing/route-table.js';

const route = (i: number, workerId = 'w1', apiPath = `/items/${i}`): WireTrigger => ({
  id: `t${i}`,
  functionId: 'app::fn',
  workerId,
  registeredAt: 1700000000000 + i,
  seq: i,
  type: 'http',
  http: { apiPath, httpMethod: 'GET' },
});

function snapshot(ownerId: string, version: number, routes: number, extra: WireTrigger[] = []): WireSnapshot {
  return {
    ownerId,
    version,
    functions: [{ id: 'app::fn', workerId: 'w1' }],
    triggers: [...Array.from({ length: routes }, (_, i) => route(i)), ...extra],
    endpoint: { nodeId: 'a', host: '127.0.0.1', port: 4100 },
    workers: [{ id: 'w1', connectedAt: 1700000000000 }],
  };
}

const routesOf = (s: WireSnapshot | undefined): string[] => (s?.triggers ?? []).map((t) => t.id).sort();
const wire = (delta: WireDelta): WireDelta => JSON.parse(JSON.stringify(delta)) as WireDelta;

describe('diffSnapshots', () => {
  it('carries only what changed: one added route is the same delta whatever the table size', () => {
    const sizes = [100, 10_000].map((r) => {
      const before = snapshot('a/0/x', 1, r);
      const after = snapshot('a/0/x', 2, r, [route(r)]);
      const delta = diffSnapshots(before, after);
      expect(delta?.set).toEqual({ triggers: [route(r)] });
      expect(delta?.del).toEqual({});
      return JSON.stringify({ ...delta, set: { triggers: [{ ...route(0) }] } }).length;
    });
    expect(sizes[0]).toBe(sizes[1]);
  });

  it('names removed records by key, changed ones in full, and an endpoint only when it changed', () => {
    const before = snapshot('a/0/x', 1, 3);
    const after: WireSnapshot = { ...snapshot('a/0/x', 2, 2), triggers: [route(0), route(1, 'w1', '/moved')] };
    const delta = diffSnapshots(before, after);
    expect(delta?.del).toEqual({ triggers: ['w1\nt2'] });
    expect(delta?.set.triggers?.map((t) => t.id)).toEqual(['t1']);
    expect(delta?.endpoint).toBeUndefined();
    expect(diffSnapshots(before, { ...after, endpoint: undefined })?.endpoint).toBeNull();
  });

  it('gives up (a full snapshot goes instead) when one worker lists the same id twice', () => {
    expect(diffSnapshots(snapshot('a/0/x', 1, 1), snapshot('a/0/x', 2, 1, [route(0)]))).toBeUndefined();
  });

  it('tells the same id registered by two workers apart', () => {
    const delta = diffSnapshots(snapshot('a/0/x', 1, 1), snapshot('a/0/x', 2, 1, [route(0, 'w2')]));
    expect(delta?.set.triggers).toEqual([route(0, 'w2')]);
  });
});

describe('diffSnapshots over a chain of publications', () => {
  /** The diff as it was written first: every record of both snapshots keyed, every one compared. */
  function wholeDiff(prev: WireSnapshot, next: WireSnapshot): { set: Record<string, string[]>; del: Record<string, string[]> } | undefined {
    const set: Record<string, string[]> = {};
    const del: Record<string, string[]> = {};
    for (const list of ['triggers', 'workers'] as const) {
      const keyOf = (r: { id: string; workerId?: string }): string => (list === 'workers' ? r.id : `${r.workerId ?? ''}\n${r.id}`);
      const keyedList = (records: readonly { id: string; workerId?: string }[] | undefined): Map<string, object> | undefined => {
        const map = new Map<string, object>();
        for (const r of records ?? []) {
          if (map.has(keyOf(r))) return undefined;
          map.set(keyOf(r), r);
        }
        return map;
      };
      const before = keyedList(prev[list]);
      const after = keyedList(next[list]);
      if (before === undefined || after === undefined) return undefined;
      const changed = [...after].filter(([k, r]) => before.get(k) === undefined || JSON.stringify(before.get(k)) !== JSON.stringify(r)).map(([k]) => k);
      const removed = [...before.keys()].filter((k) => !after.has(k));
      if (changed.length > 0) set[list] = changed;
      if (removed.length > 0) del[list] = removed;
    }
    return { set, del };
  }

  it('finds what the whole-snapshot diff finds, publication after publication', () => {
    // A pool of records (a few share an id, two workers share one): each publication picks some, in
    // pool order, sometimes the previous publication's list itself, sometimes a fresh copy of a record.
    const pool = Array.from({ length: 10 }, (_, i) => route(i % 7, i % 3 === 0 ? 'w2' : 'w1'));
    const workers = [{ id: 'w1', connectedAt: 1 }, { id: 'w2', connectedAt: 2 }];
    const publication = fc.record({ pick: fc.nat(), copy: fc.nat(), keep: fc.boolean(), workers: fc.nat({ max: 3 }) });
    fc.assert(
      fc.property(fc.array(publication, { minLength: 1, maxLength: 12 }), (publications) => {
        let prev: WireSnapshot = { ownerId: 'a/0/x', version: 1, functions: [], triggers: [] };
        for (const [n, p] of publications.entries()) {
          const triggers = p.keep ? prev.triggers : pool.filter((_, i) => (p.pick >> i) & 1).map((r, i) => ((p.copy >> i) & 1 ? { ...r } : r));
          const next: WireSnapshot = { ownerId: 'a/0/x', version: n + 2, functions: [], triggers, workers: workers.filter((_, i) => (p.workers >> i) & 1) };
          const expected = wholeDiff(prev, next);
          const delta = diffSnapshots(prev, next);
          if (expected === undefined) {
            expect(delta).toBeUndefined();
          } else {
            const keys = (records: readonly object[] | undefined, list: 'triggers' | 'workers'): string[] | undefined =>
              records?.map((r) => (list === 'workers' ? (r as { id: string }).id : `${(r as { workerId: string }).workerId}\n${(r as { id: string }).id}`));
            expect({ triggers: keys(delta?.set.triggers, 'triggers'), workers: keys(delta?.set.workers, 'workers') }).toEqual({ triggers: expected.set.triggers, workers: expected.set.workers });
            expect(delta?.del).toEqual(expected.del);
          }
          prev = next;
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('isDelta', () => {
  it('refuses a delta that does not move forward, or whose removals are not keys', () => {
    const good = { ownerId: 'a/0/x', from: 1, to: 2, set: {}, del: {} };
    expect(isDelta(good)).toBe(true);
    expect(isDelta({ ...good, to: 1 })).toBe(false);
    expect(isDelta({ ...good, from: Number.NaN })).toBe(false);
    expect(isDelta({ ...good, del: { triggers: [1] } })).toBe(false);
    expect(isDelta({ ...good, set: { triggers: 'all' } })).toBe(false);
    expect(isDelta({ ...good, ownerId: '' })).toBe(false);
  });
});

describe('PeerChains', () => {
  const v1 = snapshot('a/0/x', 1, 2);
  const v2 = snapshot('a/0/x', 2, 3);
  const v3 = snapshot('a/0/x', 3, 4);
  const d12 = wire(diffSnapshots(v1, v2) as WireDelta);
  const d23 = wire(diffSnapshots(v2, v3) as WireDelta);

  it('applies a chain and hands out a snapshot that checks and matches the sender', () => {
    const chains = new PeerChains();
    expect(chains.full(v1)).toBe(v1);
    const applied = chains.delta(d12);
    expect(applied.result).toBe('applied');
    if (applied.result !== 'applied') return;
    expect(routesOf(applied.snapshot)).toEqual(routesOf(v2));
    expect(applied.snapshot.version).toBe(2);
    expect(applied.snapshot.endpoint).toEqual(v2.endpoint);
    expect(checkSnapshot(applied.snapshot, false).ok).toBe(true);
  });

  it('ignores a duplicate (the same delta twice, or one older than a checkpoint held)', () => {
    const chains = new PeerChains();
    chains.full(v1);
    expect(chains.delta(d12).result).toBe('applied');
    expect(chains.delta(d12)).toEqual({ result: 'duplicate' });
    const later = new PeerChains();
    later.full(v3);
    expect(later.delta(d12)).toEqual({ result: 'duplicate' });
    expect(later.version('a/0/x')).toBe(3);
  });

  it('reports a gap without applying anything, and resyncs from a checkpoint', () => {
    const chains = new PeerChains();
    chains.full(v1);
    expect(chains.delta(d23)).toEqual({ result: 'gap', held: 1 });
    expect(chains.version('a/0/x')).toBe(1);
    // The resync: a newer checkpoint replaces the chain; the next delta follows it.
    expect(chains.full(v2)).toBe(v2);
    const applied = chains.delta(d23);
    expect(applied.result === 'applied' && routesOf(applied.snapshot)).toEqual(routesOf(v3));
  });

  it('handles a reorder: the later delta is a gap, the earlier applies, then the later does', () => {
    const chains = new PeerChains();
    chains.full(v1);
    expect(chains.delta(d23).result).toBe('gap');
    expect(chains.delta(d12).result).toBe('applied');
    const applied = chains.delta(d23);
    expect(applied.result === 'applied' && applied.snapshot.version).toBe(3);
  });

  it('treats a restarted peer (a new epoch in its id) as unknown until its own snapshot arrives', () => {
    const chains = new PeerChains();
    chains.full(v3);
    const restarted = snapshot('a/0/y', 1, 1);
    const next = wire(diffSnapshots(restarted, snapshot('a/0/y', 2, 2)) as WireDelta);
    // Its versions start again: nothing held for the new incarnation, so its first delta is a gap.
    expect(chains.delta(next)).toEqual({ result: 'gap', held: undefined });
    expect(chains.full(restarted)).toBe(restarted);
    expect(chains.delta(next).result).toBe('applied');
    // The earlier incarnation's chain is untouched until the membership drops it.
    expect(chains.version('a/0/x')).toBe(3);
    chains.drop('a/0/x');
    expect(chains.version('a/0/x')).toBeUndefined();
  });

  it('refuses a full snapshot not newer than the one held', () => {
    const chains = new PeerChains();
    chains.full(v2);
    expect(chains.full(v1)).toBeUndefined();
    expect(chains.full(v2)).toBeUndefined();
  });
});

describe('a change of a peer through the chain, the check and the table', () => {
  it('costs the table the records that changed, however many departed workers the peer still lists', () => {
    // A peer of 200 routes; workers of 5 routes each come and go, and each that goes is listed as
    // departed (its routes kept through the reconnect grace). Every checked record, departed ones
    // included, must be the same object on every change, or the table re-decides all their routes.
    const chains = new PeerChains();
    const table = new RouteTable(false);
    const offer = (wireSnapshot: WireSnapshot): void => {
      const checked = checkSnapshot(wireSnapshot, false);
      if (!checked.ok) throw new Error(checked.reason);
      table.applySnapshot(checked.snapshot);
    };
    offer(chains.full(snapshot('a/0/x', 1, 200)) as WireSnapshot);
    table.current();
    let version = 1;
    const workerRoutes = (k: number): WireTrigger[] => Array.from({ length: 5 }, (_, i) => ({ ...route(1000 + 5 * k + i, `c${k}`, `/c/${k}/${i}`), functionId: `c${k}::fn` }));
    const step = (set: WireDelta['set'], del: WireDelta['del']): ReturnType<RouteTable['current']>['work'] => {
      const outcome = chains.delta(wire({ ownerId: 'a/0/x', from: version, to: version + 1, set, del }));
      version++;
      if (outcome.result !== 'applied') throw new Error(outcome.result);
      offer(outcome.snapshot);
      return table.current().work;
    };
    const works: number[] = [];
    for (let k = 0; k < 8; k++) {
      const joined = step({ functions: [{ id: `c${k}::fn`, workerId: `c${k}` }], workers: [{ id: `c${k}`, connectedAt: 1 }], triggers: workerRoutes(k) }, {});
      works.push(joined.routeKeys);
      const left = step(
        { departed: [{ workerId: `c${k}`, since: 2, functionIds: [`c${k}::fn`], triggers: workerRoutes(k) }] },
        { functions: [`c${k}\nc${k}::fn`], workers: [`c${k}`], triggers: workerRoutes(k).map((t) => `c${k}\n${t.id}`) },
      );
      works.push(left.routeKeys);
    }
    // Each join and each departure decides its own 5 route keys again, not those of earlier departures.
    expect(works).toEqual(Array.from({ length: 16 }, () => 5));
    expect(table.current().routes).toHaveLength(200 + 8 * 5);
  });
});

describe('SnapshotChecker: a peer\'s snapshot checked against the one checked before', () => {
  const workerRoutes = (k: number): WireTrigger[] =>
    Array.from({ length: 3 }, (_, i) => ({ ...route(1000 + 3 * k + i, `c${k}`, `/c/${k}/${i}`), functionId: `c${k}::fn` }));

  type Op = { kind: 'join' | 'leave' | 'forget' | 'junk-summary'; k: number };

  it('gives what checkSnapshot gives, the same record objects, through any sequence of changes', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ kind: fc.constantFrom<Op['kind']>('join', 'leave', 'forget', 'junk-summary'), k: fc.integer({ min: 0, max: 5 }) }), { maxLength: 30 }),
        (ops) => {
          const chains = new PeerChains();
          const checker = new SnapshotChecker(false);
          let current = snapshot('a/0/x', 1, 20);
          const compare = (wireSnapshot: WireSnapshot): void => {
            const whole = checkSnapshot(wireSnapshot, false);
            const since = checker.check(wireSnapshot);
            expect(since).toEqual(whole);
            if (!since.ok || !whole.ok) return;
            // Element by element the same objects: the table's diff by identity sees only what changed.
            for (const list of ['functions', 'triggers', 'workers', 'departed'] as const) {
              (since.snapshot[list] ?? []).forEach((record, i) => expect(record).toBe((whole.snapshot[list] ?? [])[i]));
            }
          };
          compare(chains.full(current) as WireSnapshot);
          for (const op of ops) {
            const next: WireSnapshot = { ...current, version: current.version + 1 };
            const id = `c${op.k}`;
            const without = <T extends { workerId?: string; id?: string }>(list: readonly T[] | undefined, key: 'workerId' | 'id'): T[] => (list ?? []).filter((r) => r[key] !== id);
            if (op.kind === 'join') {
              next.functions = [...without(current.functions, 'workerId'), { id: `${id}::fn`, workerId: id }];
              next.triggers = [...without(current.triggers, 'workerId'), ...workerRoutes(op.k)];
              next.workers = [...without(current.workers, 'id'), { id, connectedAt: 5 }];
            } else if (op.kind === 'leave') {
              if (!(current.workers ?? []).some((w) => w.id === id)) continue;
              next.functions = without(current.functions, 'workerId');
              next.triggers = without(current.triggers, 'workerId');
              next.workers = without(current.workers, 'id');
              next.departed = [...without(current.departed, 'workerId'), { workerId: id, since: 2, functionIds: [`${id}::fn`], triggers: workerRoutes(op.k) }];
            } else if (op.kind === 'forget') {
              next.departed = without(current.departed, 'workerId');
            } else {
              // A malformed summary is dropped, not fatal: the checked list is shorter than the wire's.
              next.workers = [...without(current.workers, 'id'), { id, connectedAt: 'never' } as unknown as NonNullable<WireSnapshot['workers']>[number]];
            }
            const delta = diffSnapshots(current, next);
            current = next;
            if (delta === undefined) {
              compare(chains.full(next) as WireSnapshot);
              continue;
            }
            const outcome = chains.delta(wire(delta));
            if (outcome.result !== 'applied') throw new Error(outcome.result);
            compare(outcome.snapshot);
          }
        },
      ),
      { seed: 2811, numRuns: 60 },
    );
  });

  it('does not look up the records a change left alone', () => {
    // Records are checked once per wire object (a WeakMap from the object to its check); what is
    // counted here is how many of the peer's records a change makes the checker look up again.
    const lookups = vi.spyOn(WeakMap.prototype, 'get');
    const counted = (check: () => void): number => {
      lookups.mockClear();
      check();
      return lookups.mock.calls.length;
    };
    try {
      const chains = new PeerChains();
      const checker = new SnapshotChecker(false);
      expect(counted(() => expect(checker.check(chains.full(snapshot('a/0/x', 1, 500))).ok).toBe(true))).toBeGreaterThan(500);
      // One route appended: one new record checked (a few lookups); the 500 held, the function and the worker are not looked up.
      const appended = chains.delta(wire({ ownerId: 'a/0/x', from: 1, to: 2, set: { triggers: [route(500)] }, del: {} }));
      if (appended.result !== 'applied') throw new Error(appended.result);
      expect(counted(() => expect(checker.check(appended.snapshot).ok).toBe(true))).toBeLessThanOrEqual(5);
      // One route removed near the end: only the records after it (between the shared head and tail) are.
      const removed = chains.delta(wire({ ownerId: 'a/0/x', from: 2, to: 3, set: {}, del: { triggers: ['w1\nt490'] } }));
      if (removed.result !== 'applied') throw new Error(removed.result);
      let checked: ReturnType<SnapshotChecker['check']> | undefined;
      expect(counted(() => (checked = checker.check(removed.snapshot)))).toBeLessThanOrEqual(12);
      expect(checked?.ok && checked.snapshot.triggers.map((t) => t.id)).toEqual([...Array.from({ length: 501 }, (_, i) => `t${i}`).filter((t) => t !== 't490')]);
      // A peer gone is forgotten: its next snapshot is checked whole.
      checker.forget('a/0/x');
      expect(checker.size).toBe(0);
      expect(counted(() => expect(checker.check(removed.snapshot).ok).toBe(true))).toBeGreaterThan(500);
    } finally {
      lookups.mockRestore();
    }
  });

  it('holds nothing for a bus whose snapshots share no records (each parsed anew), and checks each whole', () => {
    const checker = new SnapshotChecker(false, false);
    const parsed = (version: number): WireSnapshot => JSON.parse(JSON.stringify(snapshot('a/0/x', version, 50))) as WireSnapshot;
    for (const version of [1, 2, 3]) {
      const wireSnapshot = parsed(version);
      expect(checker.check(wireSnapshot)).toEqual(checkSnapshot(wireSnapshot, false));
    }
    expect(checker.size).toBe(0);
  });

  it('refuses a change whose new record is malformed, and keeps checking against the last good one', () => {
    const chains = new PeerChains();
    const checker = new SnapshotChecker(false);
    expect(checker.check(chains.full(snapshot('a/0/x', 1, 10))).ok).toBe(true);
    const bad = chains.delta(wire({ ownerId: 'a/0/x', from: 1, to: 2, set: { triggers: [{ ...route(10), http: { apiPath: '/x?y', httpMethod: 'GET' } } as WireTrigger] }, del: {} }));
    if (bad.result !== 'applied') throw new Error(bad.result);
    expect(checker.check(bad.snapshot)).toEqual(checkSnapshot(bad.snapshot, false));
    expect(checker.check(bad.snapshot).ok).toBe(false);
    const good = snapshot('a/0/x', 3, 11);
    expect(checker.check(good)).toEqual(checkSnapshot(good, false));
  });
});
