import type { EngineFunction } from '../../workers/engine-functions.js';
import type { EngineModule, ModuleContext, ModuleTrigger, ModuleTriggerType } from '../module.js';
import { failure, inputObject, moduleCall, requiredString, requiredValue, success } from '../module-input.js';
import type { KvStore, KvUpdateOp } from '../storage/kv-store.js';
import { invalidOps, isValueTooLarge } from '../storage/update-ops.js';
import { StateTriggers } from './state-triggers.js';
import type { StateEvent } from './state-triggers.js';

/** Every state value lives in this namespace of the store, grouped by scope (kv-store.ts). */
export const STATE_NAMESPACE = 'state';

export const STATE_FUNCTIONS = {
  set: 'state::set',
  get: 'state::get',
  delete: 'state::delete',
  update: 'state::update',
  list: 'state::list',
  listGroups: 'state::list_groups',
} as const;

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * iii-state (docs/state.md): scoped key-value state with iii's functions, inputs, outputs and error
 * codes (read from iii's engine/src/workers/state/), kept in the store its adapter names, and the
 * `state` trigger type: the process that applies a write fires the matching triggers of the whole
 * cluster (docs/modules.md#who-fires).
 */
export class StateModule implements EngineModule {
  readonly name = 'iii-state';
  readonly triggerTypes: readonly ModuleTriggerType[];
  readonly functions: ReadonlyMap<string, EngineFunction>;
  private readonly triggers: StateTriggers;
  private readonly maxValueBytes: number | undefined;
  private store: KvStore | undefined;

  constructor(private readonly context: ModuleContext) {
    const config = context.config;
    this.maxValueBytes = typeof config.max_value_bytes === 'number' ? config.max_value_bytes : undefined;
    this.triggers = new StateTriggers(context, config.triggers_enabled !== false);
    this.triggerTypes = [this.triggers.type];
    this.functions = new Map<string, EngineFunction>([
      [STATE_FUNCTIONS.set, (data) => moduleCall(STATE_FUNCTIONS.set, () => this.set(data))],
      [STATE_FUNCTIONS.get, (data) => moduleCall(STATE_FUNCTIONS.get, () => this.get(data))],
      [STATE_FUNCTIONS.delete, (data) => moduleCall(STATE_FUNCTIONS.delete, () => this.delete(data))],
      [STATE_FUNCTIONS.update, (data) => moduleCall(STATE_FUNCTIONS.update, () => this.update(data))],
      [STATE_FUNCTIONS.list, (data) => moduleCall(STATE_FUNCTIONS.list, () => this.list(data))],
      [STATE_FUNCTIONS.listGroups, (data) => moduleCall(STATE_FUNCTIONS.listGroups, () => this.listGroups(data))],
    ]);
  }

  private get kv(): KvStore {
    this.store ??= this.context.kvStore();
    return this.store;
  }

  start(): Promise<void> {
    this.store ??= this.context.kvStore();
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.triggers.close();
    return Promise.resolve();
  }

  triggersChanged(triggers: readonly ModuleTrigger[]): void {
    this.triggers.replace(triggers);
  }

  private async set(data: unknown) {
    const input = inputObject(data);
    const scope = requiredString(input, 'scope');
    const key = requiredString(input, 'key');
    const value = requiredValue(input, 'value', 'data');
    if (this.maxValueBytes !== undefined) {
      const size = Buffer.byteLength(JSON.stringify(value ?? null));
      if (size > this.maxValueBytes) {
        return failure('VALUE_TOO_LARGE', `value of ${size} bytes exceeds the configured max_value_bytes limit of ${this.maxValueBytes}`);
      }
    }
    let result;
    try {
      result = await this.kv.set(STATE_NAMESPACE, scope, key, value);
    } catch (err) {
      return failure('SET_ERROR', `Failed to set value: ${message(err)}`);
    }
    this.fire(result.old_value === undefined ? 'state:created' : 'state:updated', scope, key, result.old_value, value);
    return success({ old_value: result.old_value ?? null, new_value: value });
  }

  private async get(data: unknown) {
    const input = inputObject(data);
    const scope = requiredString(input, 'scope');
    const key = requiredString(input, 'key');
    try {
      return success(await this.kv.get(STATE_NAMESPACE, scope, key));
    } catch (err) {
      return failure('GET_ERROR', `Failed to get value: ${message(err)}`);
    }
  }

  private async delete(data: unknown) {
    const input = inputObject(data);
    const scope = requiredString(input, 'scope');
    const key = requiredString(input, 'key');
    let old;
    try {
      old = (await this.kv.delete(STATE_NAMESPACE, scope, key)).old_value;
    } catch (err) {
      return failure('DELETE_ERROR', `Failed to delete value: ${message(err)}`);
    }
    // As iii: the deleted event fires even when there was nothing to delete (old_value null).
    this.fire('state:deleted', scope, key, old, null);
    return success(old);
  }

  private async update(data: unknown) {
    const input = inputObject(data);
    const scope = requiredString(input, 'scope');
    const key = requiredString(input, 'key');
    const ops = requiredValue(input, 'ops');
    const invalid = invalidOps(ops);
    if (invalid !== undefined) return failure('deserialization_error', `Failed to deserialize input for ${STATE_FUNCTIONS.update}: ${invalid}`);
    let result;
    try {
      result = await this.kv.update(STATE_NAMESPACE, scope, key, ops as KvUpdateOp[], this.maxValueBytes);
    } catch (err) {
      // Switchyard's: the value an update would write is bounded like set's (iii bounds set only).
      if (isValueTooLarge(err)) return failure('VALUE_TOO_LARGE', err.message);
      return failure('UPDATE_ERROR', `Failed to update value: ${message(err)}`);
    }
    this.fire(result.old_value === undefined ? 'state:created' : 'state:updated', scope, key, result.old_value, result.new_value);
    return success({
      old_value: result.old_value ?? null,
      new_value: result.new_value ?? null,
      ...(result.errors === undefined || result.errors.length === 0 ? {} : { errors: result.errors }),
    });
  }

  private async list(data: unknown) {
    const scope = requiredString(inputObject(data), 'scope');
    try {
      return success(await this.kv.list(STATE_NAMESPACE, scope));
    } catch (err) {
      return failure('LIST_ERROR', `Failed to list values: ${message(err)}`);
    }
  }

  private async listGroups(data: unknown) {
    // iii's input is an empty struct: any object (or nothing) is accepted.
    if (data !== undefined && data !== null) inputObject(data);
    try {
      const groups = [...new Set(await this.kv.listGroups(STATE_NAMESPACE))].sort();
      return success({ groups });
    } catch (err) {
      return failure('LIST_GROUPS_ERROR', `Failed to list groups: ${message(err)}`);
    }
  }

  private fire(eventType: StateEvent['event_type'], scope: string, key: string, oldValue: unknown, newValue: unknown): void {
    this.triggers.fire({ type: 'state', event_type: eventType, scope, key, old_value: oldValue ?? null, new_value: newValue ?? null });
  }
}
