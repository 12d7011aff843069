import type { Logger } from 'pino';
import type { CustomTriggerRecord, OwnerSnapshot, TriggerTypeRecord } from '../routing/registrations.js';
import { compareRegistrationOf } from '../routing/registrations.js';

/** What delivery needs of a local connection that may provide trigger types. */
export interface TriggerProvider {
  readonly id: string;
  readonly triggerTypes: ReadonlyMap<string, TriggerTypeRecord>;
  readonly delivered: Map<string, { trigger: CustomTriggerRecord; fingerprint: string }>;
  deliverTrigger(trigger: CustomTriggerRecord): void;
  withdrawTrigger(trigger: CustomTriggerRecord): void;
}

/**
 * Worker-provided trigger types, cluster-wide. A type's provider is its newest live registration
 * anywhere in the cluster (as in iii, a newer `registertriggertype` takes the type over); every
 * trigger of that type, registered by any worker on any process or node, is delivered to it with
 * `registertrigger`, and withdrawn with `unregistertrigger` when its owner unregisters it or leaves.
 * A trigger whose type has no provider is parked: it is delivered when one registers the type, and
 * again to a provider that reconnects. Runs on every table rebuild, on every process; only the
 * process holding the provider's socket sends anything.
 *
 * With a `freshness` barrier (a cluster child), a type newly provided here is served only once the
 * barrier has passed: this process's copy of its siblings' registrations may lag by a publish, and a
 * provider must not be handed a trigger whose owner had already left a sibling when it registered.
 */
export class TriggerDelivery {
  /** Per provider connection: its types whose barrier has passed, and those still waiting. */
  private readonly fresh = new WeakMap<TriggerProvider, Map<string, 'waiting' | 'passed'>>();

  constructor(
    private readonly ownerId: string,
    private readonly connections: () => Iterable<TriggerProvider>,
    private readonly logger: Logger,
    private readonly freshness?: { pass(): Promise<void>; retry(): void },
  ) {}

  reconcile(snapshots: readonly OwnerSnapshot[]): void {
    const providers = new Map<string, { ownerId: string; record: TriggerTypeRecord }>();
    const byType = new Map<string, CustomTriggerRecord[]>();
    for (const snapshot of snapshots) {
      for (const record of snapshot.triggerTypes ?? []) {
        const held = providers.get(record.id);
        const candidate = { ownerId: snapshot.ownerId, record };
        if (held === undefined || compareRegistrationOf(record, snapshot.ownerId, held.record, held.ownerId) > 0) {
          providers.set(record.id, candidate);
        }
      }
      for (const trigger of snapshot.customTriggers ?? []) {
        const list = byType.get(trigger.triggerType);
        if (list === undefined) byType.set(trigger.triggerType, [trigger]);
        else list.push(trigger);
      }
    }
    for (const connection of this.connections()) {
      if (connection.triggerTypes.size === 0 && connection.delivered.size === 0) continue;
      const wanted = new Map<string, CustomTriggerRecord>();
      for (const type of connection.triggerTypes.keys()) {
        const provider = providers.get(type);
        if (provider?.ownerId !== this.ownerId || provider.record.workerId !== connection.id) continue;
        if (!this.passed(connection, type)) continue;
        for (const trigger of byType.get(type) ?? []) wanted.set(trigger.id, trigger);
      }
      for (const [id, held] of connection.delivered) {
        const next = wanted.get(id);
        if (next !== undefined && fingerprintOf(next) === held.fingerprint) continue;
        connection.delivered.delete(id);
        if (connection.triggerTypes.has(held.trigger.triggerType)) connection.withdrawTrigger(held.trigger);
      }
      for (const [id, trigger] of wanted) {
        if (connection.delivered.has(id)) continue;
        connection.delivered.set(id, { trigger, fingerprint: fingerprintOf(trigger) });
        connection.deliverTrigger(trigger);
        this.logger.debug({ triggerId: id, triggerType: trigger.triggerType, provider: connection.id }, 'trigger delivered to its provider');
      }
    }
  }

  /** Whether `type` may be served on `connection` now; starts its freshness barrier the first time. */
  private passed(connection: TriggerProvider, type: string): boolean {
    const freshness = this.freshness;
    if (freshness === undefined) return true;
    let states = this.fresh.get(connection);
    if (states === undefined) this.fresh.set(connection, (states = new Map<string, 'waiting' | 'passed'>()));
    // A type unregistered and registered again waits for a barrier again.
    for (const held of states.keys()) if (!connection.triggerTypes.has(held)) states.delete(held);
    const state = states.get(type);
    if (state !== undefined) return state === 'passed';
    states.set(type, 'waiting');
    const settled = states;
    void freshness.pass().then(() => {
      if (settled.get(type) !== 'waiting') return;
      settled.set(type, 'passed');
      freshness.retry();
    });
    return false;
  }
}

function fingerprintOf(trigger: CustomTriggerRecord): string {
  return JSON.stringify([trigger.functionId, trigger.config, trigger.metadata ?? null]);
}
