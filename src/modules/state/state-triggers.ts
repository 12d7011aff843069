import type { ModuleContext, ModuleTrigger, ModuleTriggerType } from '../module.js';
import { runCondition } from '../trigger-condition.js';

/** The event a `state` trigger's function receives (iii's StateEventData). */
export interface StateEvent {
  type: 'state';
  event_type: 'state:created' | 'state:updated' | 'state:deleted';
  scope: string;
  key: string;
  old_value: unknown;
  new_value: unknown;
}

interface StateTriggerConfig {
  scope?: string;
  key?: string;
  conditionFunctionId?: string;
}

/**
 * Events whose trigger calls are still running on this process; more are dropped (and logged)
 * instead of queueing without bound behind a slow handler.
 */
const MAX_EVENTS_IN_FLIGHT = 1000;

function configOf(config: Record<string, unknown>): StateTriggerConfig {
  const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
  const out: StateTriggerConfig = {};
  const scope = text(config.scope);
  const key = text(config.key);
  const condition = text(config.condition_function_id);
  if (scope !== undefined) out.scope = scope;
  if (key !== undefined) out.key = key;
  if (condition !== undefined) out.conditionFunctionId = condition;
  return out;
}

/**
 * The `state` trigger type: the cluster's state triggers (from the table), filtered by iii's `scope`
 * and `key` (either absent matches all) and `condition_function_id`; called one after another for
 * each event, as iii does, by the process that applied the write.
 */
export class StateTriggers {
  readonly type: ModuleTriggerType = {
    id: 'state',
    description: 'State trigger: runs a function when a state value is created, updated or deleted (scope, key, condition_function_id)',
    validate: (config) => {
      for (const field of ['scope', 'key', 'condition_function_id']) {
        const value = config[field];
        if (value !== undefined && value !== null && typeof value !== 'string') {
          return `Failed to parse trigger config: invalid type for \`${field}\`, expected a string`;
        }
      }
      return undefined;
    },
  };
  private triggers: { trigger: ModuleTrigger; config: StateTriggerConfig }[] = [];
  private inFlight = 0;
  private closed = false;

  constructor(
    private readonly context: ModuleContext,
    private readonly enabled: boolean,
  ) {}

  replace(triggers: readonly ModuleTrigger[]): void {
    this.triggers = triggers.map((trigger) => ({ trigger, config: configOf(trigger.config) }));
  }

  fire(event: StateEvent): void {
    if (!this.enabled || this.closed) return;
    const matching = this.triggers.filter(
      ({ config }) => (config.scope === undefined || config.scope === event.scope) && (config.key === undefined || config.key === event.key),
    );
    if (matching.length === 0) return;
    if (this.inFlight >= MAX_EVENTS_IN_FLIGHT) {
      this.context.triggerDropped('overflow', { scope: event.scope, key: event.key, inFlight: this.inFlight, triggers: matching.length }, 'state event dropped: too many events still calling their triggers');
      return;
    }
    this.inFlight++;
    void this.run(matching, event).finally(() => this.inFlight--);
  }

  close(): void {
    this.closed = true;
  }

  private async run(matching: readonly { trigger: ModuleTrigger; config: StateTriggerConfig }[], event: StateEvent): Promise<void> {
    for (const { trigger, config } of matching) {
      if (this.closed) return;
      if (config.conditionFunctionId !== undefined && !(await runCondition(this.context, config.conditionFunctionId, event))) continue;
      const outcome = await this.context.invoke(trigger.functionId, event, trigger.metadata === undefined ? {} : { metadata: trigger.metadata });
      if (!outcome.ok) this.context.triggerDropped(outcome.failure, { triggerId: trigger.id, functionId: trigger.functionId }, 'state trigger call failed');
    }
  }
}
