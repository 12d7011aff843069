import pino from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { ModuleContext } from '../../src/modules/module.js';
import { StateModule } from '../../src/modules/state/state-module.js';
import { MemoryKvStore, MemoryLeaseStore } from '../../src/modules/storage/memory-kv-store.js';

function stateModule(config: Record<string, unknown>) {
  const store = new MemoryKvStore();
  const context: ModuleContext = {
    logger: pino({ level: 'silent' }),
    peerId: 'p1',
    config,
    invoke: () => Promise.resolve({ ok: true, value: null }),
    triggerDropped: () => undefined,
    hasFunction: () => false,
    kvStore: () => store,
    leases: () => new MemoryLeaseStore(),
    leaseMs: 1000,
    registry: new Registry(),
    cluster: { name: 'c' },
  };
  const module = new StateModule(context);
  const call = (id: string, data: unknown) => {
    const fn = module.functions.get(id);
    if (fn === undefined) throw new Error(`no ${id}`);
    return fn(data, undefined as never);
  };
  return { store, call };
}

describe('iii-state max_value_bytes', () => {
  it('bounds the value state::update would write, not only state::set (VALUE_TOO_LARGE, nothing written)', async () => {
    const { store, call } = stateModule({ max_value_bytes: 50 });
    const append = () => call('state::update', { scope: 's', key: 'k', ops: [{ type: 'append', path: 'log', value: 'y'.repeat(20) }] });
    expect((await append()).ok).toBe(true);
    expect((await append()).ok).toBe(true);
    expect(await append()).toEqual({ ok: false, error: { code: 'VALUE_TOO_LARGE', message: 'value of 70 bytes exceeds the configured max_value_bytes limit of 50' } });
    expect(await store.get('state', 's', 'k')).toEqual({ log: 'y'.repeat(40) });
    // Unset: no limit, as iii.
    const unbounded = stateModule({});
    const big = await unbounded.call('state::update', { scope: 's', key: 'k', ops: [{ type: 'set', path: 'v', value: 'z'.repeat(10_000) }] });
    expect(big.ok).toBe(true);
  });
});
