import { afterEach, describe, expect, it, vi } from 'vitest';
import type { FunctionRecord, TriggerRecord } from '../../src/routing/registrations.js';
import { validateTrigger } from '../../src/routing/trigger-config.js';
import type { HubMember } from '../../src/workers/worker-hub.js';
import { WorkerHub, retireRelayed } from '../../src/workers/worker-hub.js';

/** Just what the hub reads of a connection. */
function fakeConnection(id: string, functionIds: string[], routes: [string, string][] = [], retire = (): void => undefined): HubMember {
  const functions = new Map<string, FunctionRecord>(functionIds.map((fn) => [fn, { id: fn, workerId: id }]));
  const triggers = new Map<string, TriggerRecord>();
  for (const [fn, path] of routes) {
    const v = validateTrigger('http', { api_path: path, http_method: 'GET' }, false);
    if (!v.ok) throw new Error(v.message);
    triggers.set(`t-${fn}`, { ...v.spec, id: `t-${fn}`, functionId: fn, workerId: id, registeredAt: 1, seq: 1 });
  }
  return { id, functions, triggers, triggerTypes: new Map(), customTriggers: new Map(), isOpen: true, connectedAt: 0, info: {}, reattachToken: `token-${id}`, retire };
}

function connect(hub: WorkerHub, connection: HubMember): void {
  hub.add(connection);
  for (const fn of connection.functions.keys()) hub.functionAdded(connection, fn);
}

afterEach(() => {
  vi.useRealTimers();
});

describe('WorkerHub: departed workers', () => {
  it('keeps a removed worker as departed for the grace, then drops it', () => {
    vi.useFakeTimers();
    const hub = new WorkerHub('p1', 1000);
    const changes = vi.fn();
    hub.onChange(changes);
    const w = fakeConnection('w1', ['f'], [['f', '/f']]);
    connect(hub, w);
    hub.remove(w);
    expect(hub.has('f')).toBe(false);
    const snapshot = hub.snapshot();
    expect(snapshot.functions).toEqual([]);
    expect(snapshot.triggers).toEqual([]);
    expect(snapshot.departed).toEqual([{ workerId: 'w1', since: w.connectedAt, functionIds: ['f'], triggers: [...w.triggers.values()] }]);
    const before = changes.mock.calls.length;
    vi.advanceTimersByTime(999);
    expect(hub.snapshot().departed).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(hub.snapshot().departed).toBeUndefined();
    expect(changes.mock.calls.length).toBe(before + 1);
  });

  it('keeps nothing with a grace of 0, nor for a worker that registered nothing', () => {
    const none = new WorkerHub('p1', 0);
    const w = fakeConnection('w1', ['f']);
    connect(none, w);
    none.remove(w);
    expect(none.snapshot().departed).toBeUndefined();
    const hub = new WorkerHub('p2', 1000);
    const empty = fakeConnection('w2', []);
    hub.add(empty);
    hub.remove(empty);
    expect(hub.snapshot().departed).toBeUndefined();
  });

  it('bounds the departed list under churn, forgetting the oldest first', () => {
    vi.useFakeTimers();
    const hub = new WorkerHub('p1', 60_000);
    for (let i = 0; i < 1100; i++) {
      const w = fakeConnection(`w${i}`, [`f${i}`]);
      connect(hub, w);
      hub.remove(w);
    }
    const departed = hub.snapshot().departed ?? [];
    expect(departed).toHaveLength(1024);
    expect(departed[0]?.workerId).toBe('w76');
    expect(departed.at(-1)?.workerId).toBe('w1099');
  });
});

describe('WorkerHub.pickOwner', () => {
  it('keeps a turn per function: interleaved functions each spread over both workers', () => {
    const hub = new WorkerHub('p1', 0);
    connect(hub, fakeConnection('w1', ['mw', 'handler']));
    connect(hub, fakeConnection('w2', ['mw', 'handler']));
    const picks: string[] = [];
    for (let i = 0; i < 4; i++) for (const fn of ['mw', 'handler']) picks.push(`${fn}@${hub.pickOwner(fn)?.id}`);
    expect(picks.sort()).toEqual(['handler@w1', 'handler@w1', 'handler@w2', 'handler@w2', 'mw@w1', 'mw@w1', 'mw@w2', 'mw@w2']);
  });
});

describe('WorkerHub.retire', () => {
  it('retires a connection only with its own reattach token', () => {
    const hub = new WorkerHub('p1', 0);
    const retire = vi.fn();
    const w = fakeConnection('w1', ['f'], [], retire);
    connect(hub, w);
    expect(hub.retire('w1', 'token-other')).toBe('wrong-token');
    expect(hub.retire('w1', 'tok')).toBe('wrong-token');
    expect(retire).not.toHaveBeenCalled();
    expect(hub.retire('nobody', 'token-w1')).toBe('unknown');
    expect(hub.retire('w1', 'token-w1')).toBe('retired');
    expect(retire).toHaveBeenCalledOnce();
  });

  it('retireRelayed logs a retirement and a wrong token, and nothing for an unknown worker', () => {
    const hub = new WorkerHub('p1', 0);
    connect(hub, fakeConnection('w1', ['f']));
    const logger = { info: vi.fn(), warn: vi.fn() };
    const relay = retireRelayed(hub, logger as unknown as Parameters<typeof retireRelayed>[1]);
    relay('w1', 'bad');
    relay('nobody', 'token-nobody');
    expect(logger.warn).toHaveBeenCalledOnce();
    expect(logger.info).not.toHaveBeenCalled();
    relay('w1', 'token-w1');
    expect(logger.info).toHaveBeenCalledOnce();
  });
});
