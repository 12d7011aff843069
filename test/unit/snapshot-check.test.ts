import { describe, expect, it } from 'vitest';
import { checkSnapshot } from '../../src/bus/snapshot-check.js';
import type { OwnerSnapshot, TriggerRecord } from '../../src/routing/registrations.js';
import { validateTrigger } from '../../src/routing/trigger-config.js';
import { RouteTable } from '../../src/routing/route-table.js';

function trigger(id: string, type: string, config: Record<string, unknown>): TriggerRecord {
  const v = validateTrigger(type, config, false);
  if (!v.ok) throw new Error(v.message);
  return { ...v.spec, id, functionId: `fn::${id}`, workerId: 'w1', registeredAt: 10, seq: 1 };
}

const valid: OwnerSnapshot = {
  ownerId: 'node/0/x',
  version: 3,
  functions: [{ id: 'fn::a', workerId: 'w1', description: 'A' }],
  triggers: [
    trigger('a', 'http', { api_path: '/users/:id', http_method: 'get', condition_function_id: 'c', middleware_function_ids: ['m1'] }),
    trigger('m', 'http_middleware', { phase: 'preHandler', scope: { path: '/api/*' }, priority: 5 }),
  ],
  endpoint: { nodeId: 'node', socketPath: '/tmp/x.sock', host: '10.0.0.1', port: 4000 },
  workers: [{ id: 'w1', connectedAt: 5, name: 'api', runtime: 'node', version: '0.22.1', pid: 42 }],
  publishedAt: 1234,
};

describe('checkSnapshot', () => {
  it('accepts a snapshot that went through JSON, re-deriving its patterns', () => {
    const wire: unknown = JSON.parse(JSON.stringify(valid));
    const checked = checkSnapshot(wire, false);
    expect(checked).toEqual({ ok: true, snapshot: valid });
  });

  it('accepts departed workers (reconnect grace), re-deriving their trigger patterns too', () => {
    const withDeparted: OwnerSnapshot = { ...valid, departed: [{ workerId: 'w0', functionIds: ['fn::a'], triggers: valid.triggers }] };
    expect(checkSnapshot(JSON.parse(JSON.stringify(withDeparted)), false)).toEqual({ ok: true, snapshot: withDeparted });
  });

  it('drops malformed worker summaries instead of refusing the snapshot (they are informational)', () => {
    const checked = checkSnapshot(JSON.parse(JSON.stringify({ ...valid, workers: [{ id: 7 }, { id: 'ok', connectedAt: 1 }] })), false);
    expect(checked.ok && checked.snapshot.workers).toEqual([{ id: 'ok', connectedAt: 1 }]);
  });

  it.each([
    ['no owner', { ...valid, ownerId: '' }],
    ['version not a number', { ...valid, version: 'x' }],
    ['functions not an array', { ...valid, functions: {} }],
    ['function without id', { ...valid, functions: [{ workerId: 'w' }] }],
    ['trigger without fields', { ...valid, triggers: [{ type: 'http' }] }],
    ['trigger of unknown type', { ...valid, triggers: [{ ...valid.triggers[0], type: 'cron' }] }],
    ['http trigger with a bad path', { ...valid, triggers: [{ ...valid.triggers[0], http: { apiPath: '/nope?x', httpMethod: 'GET' } }] }],
    ['middleware with a bad phase', { ...valid, triggers: [{ ...valid.triggers[1], middleware: { phase: 'never', priority: 0 } }] }],
    ['non-numeric seq', { ...valid, triggers: [{ ...valid.triggers[0], seq: null }] }],
    ['endpoint port out of range', { ...valid, endpoint: { nodeId: 'n', host: 'h', port: 70000 } }],
    ['endpoint without node', { ...valid, endpoint: { socketPath: '/x' } }],
    ['departed not an array', { ...valid, departed: {} }],
    ['departed worker without id', { ...valid, departed: [{ functionIds: [], triggers: [] }] }],
    ['departed function id not a string', { ...valid, departed: [{ workerId: 'w', functionIds: [7], triggers: [] }] }],
    ['departed trigger with a bad path', { ...valid, departed: [{ workerId: 'w', functionIds: [], triggers: [{ ...valid.triggers[0], http: { apiPath: '/nope?x', httpMethod: 'GET' } }] }] }],
  ])('refuses %s', (_name, snapshot) => {
    const checked = checkSnapshot(JSON.parse(JSON.stringify(snapshot)), false);
    expect(checked.ok).toBe(false);
  });

  it('a refused snapshot never reaches the table, so building routes cannot throw', () => {
    const table = new RouteTable(false);
    const hostile = { ...valid, triggers: [{ type: 'http' }] };
    const checked = checkSnapshot(hostile, false);
    if (checked.ok) table.applySnapshot(checked.snapshot);
    expect(() => table.current()).not.toThrow();
    expect(table.current().router.size).toBe(0);
  });
});
