import type { Logger } from 'pino';
import type { InvocationFailure } from '../../invocation/invoker.js';
import { isPlainObject } from '../../values.js';
import type { StreamCalls } from './stream-functions.js';
import type { JoinLeaveEvent, StreamMessage } from './stream-wire.js';

export const STREAM_TRIGGER_TYPE = 'stream';
export const JOIN_TRIGGER_TYPE = 'stream:join';
export const LEAVE_TRIGGER_TYPE = 'stream:leave';
export const STREAM_TRIGGER_TYPES = [STREAM_TRIGGER_TYPE, JOIN_TRIGGER_TYPE, LEAVE_TRIGGER_TYPE] as const;

/** A trigger of one of the stream types, registered by any worker anywhere in the cluster. */
export interface StreamTriggerRecord {
  id: string;
  functionId: string;
  config: Record<string, unknown>;
  metadata?: Record<string, unknown>;
}

export interface StreamTriggerDeps {
  /** The cluster-wide triggers of a type, as the replicated table holds them now. */
  triggersOf(type: string): readonly StreamTriggerRecord[];
  calls: StreamCalls;
  logger: Logger;
  /** Change events whose trigger calls may be running at once; beyond that, new ones are dropped and counted. */
  maxPendingFirings: number;
  /** A trigger call dropped (overflow, or a call that failed): counted and logged by the caller; absent, logged here. */
  dropped?(cause: InvocationFailure | 'overflow', fields: Record<string, unknown>, message: string): void;
}

/**
 * Checks a `registertrigger` of a stream type. `stream` needs a `stream_name` (iii cannot register
 * one without it); `group_id`, `item_id` and `condition_function_id` are optional strings.
 */
export function checkStreamTriggerConfig(type: string, config: unknown): string | undefined {
  if (type !== STREAM_TRIGGER_TYPE) return undefined;
  if (!isPlainObject(config)) return 'stream trigger config must be an object with stream_name';
  if (typeof config.stream_name !== 'string' || config.stream_name === '') return 'stream trigger config needs stream_name (a string)';
  for (const field of ['group_id', 'item_id', 'condition_function_id']) {
    const value = config[field];
    if (value !== undefined && value !== null && typeof value !== 'string') return `stream trigger config ${field} must be a string`;
  }
  return undefined;
}

const optionalText = (value: unknown): string => (typeof value === 'string' ? value : '');

/** Whether a `stream` trigger's filters take a change: its stream, and its group and item when set. */
export function streamTriggerMatches(config: Record<string, unknown>, message: StreamMessage): boolean {
  if (config.stream_name !== message.streamName) return false;
  const group = optionalText(config.group_id);
  const item = optionalText(config.item_id);
  return (group === '' || group === message.groupId) && (item === '' || item === (message.id ?? ''));
}

/**
 * Runs the stream trigger types (docs/stream.md#trigger-types). `stream` handlers run on the process
 * that made the change, for every matching trigger in the cluster (so once per change); `stream:join`
 * and `stream:leave` on the process holding the client's socket.
 */
export class StreamTriggers {
  private pending = 0;

  constructor(private readonly deps: StreamTriggerDeps) {}

  /** Fire and forget, as iii: the writer does not wait for the handlers. */
  fire(message: StreamMessage): void {
    const matching = this.deps.triggersOf(STREAM_TRIGGER_TYPE).filter((t) => streamTriggerMatches(t.config, message));
    if (matching.length === 0) return;
    if (this.pending >= this.deps.maxPendingFirings) {
      this.drop('overflow', { streamName: message.streamName, triggers: matching.length }, 'stream trigger calls dropped: too many still running');
      return;
    }
    this.pending++;
    void this.runInOrder(matching, message).finally(() => this.pending--);
  }

  private async runInOrder(triggers: readonly StreamTriggerRecord[], message: StreamMessage): Promise<void> {
    for (const trigger of triggers) {
      try {
        const conditionId = trigger.config.condition_function_id;
        if (typeof conditionId === 'string' && conditionId !== '') {
          const condition = await this.deps.calls.invoke(conditionId, message);
          if (!condition.ok) {
            this.drop(condition.failure, { conditionFunctionId: conditionId, functionId: trigger.functionId }, 'stream trigger condition failed; handler skipped');
            continue;
          }
          // As iii: only an explicit false skips the handler.
          if (condition.value === false) continue;
        }
        const outcome = await this.deps.calls.invoke(trigger.functionId, message, trigger.metadata);
        if (!outcome.ok) this.drop(outcome.failure, { triggerId: trigger.id, functionId: trigger.functionId }, 'stream trigger handler failed');
      } catch (err) {
        this.deps.logger.error({ err, functionId: trigger.functionId }, 'stream trigger call threw');
      }
    }
  }

  /**
   * Runs every `stream:join` handler in turn; a join is refused when one answers `{unauthorized: true}`
   * (a failing handler or a non-boolean answer does not refuse it, as iii).
   */
  async join(event: JoinLeaveEvent): Promise<{ unauthorized: boolean }> {
    let unauthorized = false;
    for (const trigger of this.deps.triggersOf(JOIN_TRIGGER_TYPE)) {
      const outcome = await this.deps.calls.invoke(trigger.functionId, event, trigger.metadata);
      if (!outcome.ok) {
        this.drop(outcome.failure, { triggerId: trigger.id, functionId: trigger.functionId }, 'stream:join handler failed');
        continue;
      }
      if (isPlainObject(outcome.value) && outcome.value.unauthorized === true) unauthorized = true;
    }
    return { unauthorized };
  }

  async leave(event: JoinLeaveEvent): Promise<void> {
    for (const trigger of this.deps.triggersOf(LEAVE_TRIGGER_TYPE)) {
      const outcome = await this.deps.calls.invoke(trigger.functionId, event, trigger.metadata);
      if (!outcome.ok) this.drop(outcome.failure, { triggerId: trigger.id, functionId: trigger.functionId }, 'stream:leave handler failed');
    }
  }

  private drop(cause: InvocationFailure | 'overflow', fields: Record<string, unknown>, message: string): void {
    if (this.deps.dropped !== undefined) this.deps.dropped(cause, fields, message);
    else this.deps.logger.warn({ ...fields, ...(cause === 'overflow' ? {} : { code: cause.code }) }, message);
  }
}
