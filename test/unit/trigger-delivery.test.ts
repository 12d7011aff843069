import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { CustomTriggerRecord, OwnerSnapshot, TriggerTypeRecord } from '../../src/routing/registrations.js';
import type { TriggerProvider } from '../../src/workers/trigger-delivery.js';
import { TriggerDelivery } from '../../src/workers/trigger-delivery.js';

const logger = pino({ level: 'silent' });

function provider(id: string, types: TriggerTypeRecord[]): TriggerProvider & { sent: string[] } {
  const sent: string[] = [];
  return {
    id,
    triggerTypes: new Map(types.map((t) => [t.id, t])),
    delivered: new Map(),
    sent,
    deliverTrigger: (t) => sent.push(`+${t.id}`),
    withdrawTrigger: (t) => sent.push(`-${t.id}`),
  };
}

const type = (id: string, workerId: string, registeredAt: number): TriggerTypeRecord => ({ id, workerId, registeredAt, seq: registeredAt });
const trigger = (id: string, triggerType: string, config: Record<string, unknown> = {}): CustomTriggerRecord => ({
  id,
  triggerType,
  functionId: `fn::${id}`,
  workerId: 'consumer',
  config,
});
const snapshot = (ownerId: string, parts: Partial<OwnerSnapshot>): OwnerSnapshot => ({ ownerId, version: 1, functions: [], triggers: [], ...parts });

describe('TriggerDelivery', () => {
  it('delivers every trigger of a type, from any owner, to its provider here, once', () => {
    const p = provider('w1', [type('cron', 'w1', 10)]);
    const delivery = new TriggerDelivery('me', () => [p], logger);
    const snapshots = [
      snapshot('me', { triggerTypes: [type('cron', 'w1', 10)] }),
      snapshot('peer', { customTriggers: [trigger('a', 'cron'), trigger('b', 'queue')] }),
      snapshot('other', { customTriggers: [trigger('c', 'cron')] }),
    ];
    delivery.reconcile(snapshots);
    delivery.reconcile(snapshots);
    expect(p.sent).toEqual(['+a', '+c']);
  });

  it('withdraws a trigger that left, and redelivers one whose config changed', () => {
    const p = provider('w1', [type('cron', 'w1', 10)]);
    const delivery = new TriggerDelivery('me', () => [p], logger);
    const mine = snapshot('me', { triggerTypes: [type('cron', 'w1', 10)] });
    delivery.reconcile([mine, snapshot('peer', { customTriggers: [trigger('a', 'cron'), trigger('b', 'cron')] })]);
    delivery.reconcile([mine, snapshot('peer', { customTriggers: [trigger('b', 'cron', { every: 5 })] })]);
    expect(p.sent).toEqual(['+a', '+b', '-a', '-b', '+b']);
  });

  it('gives the type to its newest provider anywhere; the old provider gives back what it held', () => {
    const old = provider('w1', [type('cron', 'w1', 10)]);
    const delivery = new TriggerDelivery('me', () => [old], logger);
    const consumers = snapshot('peer', { customTriggers: [trigger('a', 'cron')] });
    delivery.reconcile([snapshot('me', { triggerTypes: [type('cron', 'w1', 10)] }), consumers]);
    // A newer provider registers on another process: this one stops serving the type.
    delivery.reconcile([snapshot('me', { triggerTypes: [type('cron', 'w1', 10)] }), consumers, snapshot('far', { triggerTypes: [type('cron', 'w9', 20)] })]);
    expect(old.sent).toEqual(['+a', '-a']);
    // The newer one leaves: the type comes back here, with its triggers.
    delivery.reconcile([snapshot('me', { triggerTypes: [type('cron', 'w1', 10)] }), consumers]);
    expect(old.sent).toEqual(['+a', '-a', '+a']);
  });

  it('sends nothing for a type no provider offers (the trigger stays parked)', () => {
    const p = provider('w1', []);
    const delivery = new TriggerDelivery('me', () => [p], logger);
    delivery.reconcile([snapshot('peer', { customTriggers: [trigger('a', 'cron')] })]);
    expect(p.sent).toEqual([]);
  });

  it('with a freshness barrier, serves a newly provided type only once the barrier has passed', async () => {
    const p = provider('w1', [type('cron', 'w1', 10)]);
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let passes = 0;
    let retries = 0;
    const delivery = new TriggerDelivery('me', () => [p], logger, {
      pass: () => {
        passes++;
        return gate;
      },
      retry: () => retries++,
    });
    const mine = snapshot('me', { triggerTypes: [type('cron', 'w1', 10)] });
    // What this process held when the type was registered: a trigger whose owner has since left.
    delivery.reconcile([mine, snapshot('peer', { customTriggers: [trigger('gone', 'cron')] })]);
    delivery.reconcile([mine, snapshot('peer', { version: 2, customTriggers: [trigger('a', 'cron')] })]);
    expect(p.sent).toEqual([]);
    open();
    await gate;
    await Promise.resolve();
    expect(retries).toBe(1);
    delivery.reconcile([mine, snapshot('peer', { version: 2, customTriggers: [trigger('a', 'cron')] })]);
    expect(p.sent).toEqual(['+a']);
    expect(passes).toBe(1);
  });
});
