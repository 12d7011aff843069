import { describe, expect, it } from 'vitest';
import { clusterWorkerCount, routeWorkerCounts } from '../../src/observability/cluster-census.js';
import { RouteTable } from '../../src/routing/route-table.js';
import type { OwnerSnapshot, TriggerRecord } from '../../src/routing/registrations.js';
import { validateTrigger } from '../../src/routing/trigger-config.js';
import { busState, nodeReady } from '../../src/supervisor/node-health.js';

const up = { ready: true, busSynced: true };
const cut = { ready: true, busSynced: false };

describe('nodeReady (docs/operations.md#readiness)', () => {
  it('at start: every child must be ready', () => {
    expect(nodeReady({ draining: false, started: false, children: [up, undefined] })).toBe(false);
    expect(nodeReady({ draining: false, started: false, children: [up, up] })).toBe(true);
    expect(nodeReady({ draining: false, started: false, children: [] })).toBe(false);
  });

  it('a Redis outage alone does not fail it', () => {
    expect(nodeReady({ draining: false, started: true, children: [cut, cut] })).toBe(true);
    expect(busState([cut, up])).toBe('out_of_sync');
    expect(busState([up, up])).toBe('in_sync');
  });

  it('after start: one serving child is enough; none, or draining, fails it', () => {
    expect(nodeReady({ draining: false, started: true, children: [up, undefined] })).toBe(true);
    expect(nodeReady({ draining: false, started: true, children: [undefined, { ready: false, busSynced: true }] })).toBe(false);
    expect(nodeReady({ draining: true, started: true, children: [up, up] })).toBe(false);
  });
});

describe('cluster census', () => {
  const trigger = (id: string, functionId: string, path: string, workerId: string): TriggerRecord => {
    const validated = validateTrigger('http', { api_path: path, http_method: 'GET' }, false);
    if (!validated.ok) throw new Error(validated.message);
    return { ...validated.spec, id, functionId, workerId, registeredAt: 1, seq: 0 };
  };
  it('counts workers cluster-wide and per route', () => {
    const a: OwnerSnapshot = {
      ownerId: 'a',
      version: 1,
      functions: [{ id: 'f::one', workerId: 'w1' }],
      triggers: [trigger('t1', 'f::one', '/one', 'w1')],
      workers: [{ id: 'w1', connectedAt: 1 }],
    };
    const b: OwnerSnapshot = {
      ownerId: 'b',
      version: 1,
      functions: [{ id: 'f::one', workerId: 'w2' }],
      triggers: [],
      workers: [{ id: 'w2', connectedAt: 1 }, { id: 'w3', connectedAt: 1 }],
    };
    const table = new RouteTable(false, []);
    table.applySnapshot(a);
    table.applySnapshot(b);
    expect(clusterWorkerCount(table.snapshotsHeld())).toBe(3);
    expect(routeWorkerCounts(table.current(), table.snapshotsHeld())).toEqual([{ method: 'GET', route: '/one', workers: 2 }]);
  });
});
