import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import type { InvocationOutcome, Invoker } from '../../src/invocation/invoker.js';
import { ModuleHost } from '../../src/modules/module-host.js';
import { createRootLogger } from '../../src/observability/logger.js';
import type { CustomTriggerRecord } from '../../src/routing/registrations.js';
import type { EngineFunction } from '../../src/workers/engine-functions.js';
import type { EngineFunctions } from '../../src/workers/engine-functions.js';

/**
 * Trigger calls the modules drop (no handler, a failed handler, too many in flight) are counted in
 * switchyard_module_trigger_drops_total{module, reason} and logged, throttled (docs/modules.md#metrics).
 */
function host(handlers: Record<string, () => Promise<unknown>>) {
  const config = parseConfig({ modules: [{ name: 'iii-state', config: {} }, { name: 'iii-pubsub', config: {} }] });
  const lines: Record<string, unknown>[] = [];
  const logger = createRootLogger('debug', { destination: { write: (chunk: string) => lines.push(JSON.parse(chunk) as Record<string, unknown>) } });
  const invoker: Invoker = {
    has: (id) => id in handlers,
    fire: () => false,
    invoke: async (id): Promise<InvocationOutcome> => {
      const handler = handlers[id];
      if (handler === undefined) return { ok: false, failure: { source: 'engine', code: 'FUNCTION_UNAVAILABLE', message: `no worker serves ${id}` } };
      try {
        return { ok: true, value: await handler() };
      } catch (err) {
        return { ok: false, failure: { source: 'worker', code: 'invocation_failed', message: (err as Error).message } };
      }
    },
  };
  const registry = new Registry();
  const modules = new ModuleHost({ config, logger, peerId: 'peer-1', invoker, registry });
  const functions = new Map<string, EngineFunction>();
  modules.registerFunctions({ register: (id: string, fn: EngineFunction) => functions.set(id, fn) } as unknown as EngineFunctions);
  const call = (id: string, data: unknown) => (functions.get(id) as EngineFunction)(data, undefined as never);
  const triggers = (list: Omit<CustomTriggerRecord, 'workerId'>[]) =>
    modules.reconcile([{ ownerId: 'peer-1', version: 1, functions: [], triggers: [], customTriggers: list.map((t) => ({ ...t, workerId: 'w1' })) }]);
  const drops = async (module: string, reason: string): Promise<number> => {
    const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === 'switchyard_module_trigger_drops_total');
    const values = (metric as { values?: { labels: Record<string, string>; value: number }[] } | undefined)?.values ?? [];
    return values.find((v) => v.labels.module === module && v.labels.reason === reason)?.value ?? 0;
  };
  return { call, triggers, drops, lines };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

describe('dropped module trigger calls', () => {
  it('counts a subscriber nobody serves and a failing state trigger, and throttles their warnings', async () => {
    const { call, triggers, drops, lines } = host({ 'app::fails': () => Promise.reject(new Error('boom')) });
    triggers([
      { id: 't1', triggerType: 'subscribe', functionId: 'app::gone', config: { topic: 'orders' } },
      { id: 't2', triggerType: 'state', functionId: 'app::fails', config: { scope: 'users' } },
    ]);
    for (let i = 0; i < 20; i++) await call('publish', { topic: 'orders', data: i });
    await call('state::set', { scope: 'users', key: 'u1', value: 1 });
    await settle();
    expect(await drops('iii-pubsub', 'no_handler')).toBe(20);
    expect(await drops('iii-state', 'failed')).toBe(1);
    const warnings = lines.filter((l) => l.level === 40 && l.msg === 'subscriber call failed');
    // 20 drops, 5 warnings in the window; the rest at debug, so nothing is lost.
    expect(warnings).toHaveLength(5);
    expect(warnings[0]).toMatchObject({ module: 'iii-pubsub', dropReason: 'no_handler', code: 'FUNCTION_UNAVAILABLE', topic: 'orders', functionId: 'app::gone' });
    expect(lines.filter((l) => l.msg === 'subscriber call failed')).toHaveLength(20);
    expect(lines.find((l) => l.msg === 'state trigger call failed')).toMatchObject({ level: 40, dropReason: 'failed', code: 'invocation_failed', reason: 'boom' });
  });

  it('counts publishes dropped because too many are still calling their subscribers', async () => {
    const { call, triggers, drops } = host({ 'app::slow': () => new Promise(() => undefined) });
    triggers([{ id: 't1', triggerType: 'subscribe', functionId: 'app::slow', config: { topic: 'busy' } }]);
    for (let i = 0; i < 1003; i++) await call('publish', { topic: 'busy', data: i });
    expect(await drops('iii-pubsub', 'overflow')).toBe(3);
    expect(await drops('iii-pubsub', 'no_handler')).toBe(0);
  });
});
