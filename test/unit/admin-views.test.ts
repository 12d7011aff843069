import { describe, expect, it } from 'vitest';
import { routesView, workersView } from '../../src/routing/admin-views.js';
import type { OwnerSnapshot } from '../../src/routing/registrations.js';
import { RouteTable } from '../../src/routing/route-table.js';
import { validateTrigger } from '../../src/routing/trigger-config.js';

function snapshot(ownerId: string, workerId: string, functionId: string, apiPath: string, nodeId?: string): OwnerSnapshot {
  const v = validateTrigger('http', { api_path: apiPath, http_method: 'GET', condition_function_id: 'cond' }, false);
  if (!v.ok) throw new Error(v.message);
  return {
    ownerId,
    version: 1,
    functions: [{ id: functionId, workerId }],
    triggers: [{ ...v.spec, id: `t-${functionId}`, functionId, workerId, registeredAt: 1, seq: 1 }],
    workers: [{ id: workerId, connectedAt: 5, name: `${workerId}-name` }],
    ...(nodeId === undefined ? {} : { endpoint: { nodeId } }),
  };
}

describe('admin views', () => {
  it('routesView lists each route with its owners and holder, optional fields only when set', () => {
    const table = new RouteTable(false);
    table.applySnapshot(snapshot('p1', 'w1', 'f', '/a'));
    table.applySnapshot(snapshot('p2', 'w2', 'f', '/a'));
    const view = routesView(table.current());
    expect(view).toEqual({
      tableVersion: table.current().version,
      routes: [
        {
          method: 'GET',
          path: '/a',
          function_id: 'f',
          owners: ['p1', 'p2'],
          owner: { principal: 'listener-0', peer: 'p2', worker_id: 'w2', trigger_id: 't-f' },
          condition_function_id: 'cond',
        },
      ],
      middleware: [],
    });
  });

  it('workersView names the node of every worker, this process from `self`', () => {
    const snapshots = [snapshot('self', 'w1', 'f', '/a'), snapshot('p2', 'w2', 'g', '/b', 'node-b'), snapshot('p3', 'w3', 'h', '/c')];
    expect(workersView(snapshots, { ownerId: 'self', nodeId: 'node-a' })).toEqual([
      { id: 'w1', connectedAt: 5, name: 'w1-name', peer: 'self', node: 'node-a', functions: ['f'] },
      { id: 'w2', connectedAt: 5, name: 'w2-name', peer: 'p2', node: 'node-b', functions: ['g'] },
      { id: 'w3', connectedAt: 5, name: 'w3-name', peer: 'p3', functions: ['h'] },
    ]);
  });
});
