import type { InvocationOutcome } from '../invocation/invoker.js';
import type { RegisterFunctionMessage, RegisterTriggerMessage, RegisterTriggerTypeMessage } from '../protocol/messages.js';
import { isPlainObject } from '../values.js';
import type { WorkerSession } from './worker-session.js';

/** A registration as it may go ahead (possibly changed by a hook and the registration prefix), or why not. */
export type Gated<T> = { ok: true; message: T } | { ok: false; reason: string };

/** Calls a function through the engine (the hooks may be served by any worker in the cluster). */
export type HookCaller = (functionId: string, data: unknown) => Promise<InvocationOutcome>;

const optionalString = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/**
 * What a session lets a worker register, as iii decides it (engine/src/engine/mod.rs, the
 * `RegisterFunction`, `RegisterTrigger` and `RegisterTriggerType` arms): the session's flags first,
 * then the listener's hook, whose result object may change the registration (a field it leaves out
 * keeps its value) and whose failure — or a result that is not an object — refuses it; then the
 * session's registration prefix.
 */
export class RegistrationGate {
  constructor(
    private readonly session: WorkerSession,
    private readonly call: HookCaller,
  ) {}

  /** Whether any registration waits for a hook (then the connection handles registrations in order, one at a time). */
  get hasHooks(): boolean {
    const rbac = this.session.policy.rbac;
    return (
      rbac?.onFunctionRegistrationFunctionId !== undefined ||
      rbac?.onTriggerRegistrationFunctionId !== undefined ||
      rbac?.onTriggerTypeRegistrationFunctionId !== undefined
    );
  }

  private get context(): unknown {
    return this.session.auth.context;
  }

  /** Calls the hook when there is one; without, decides at once (synchronously: registration stays in order, in one turn). */
  private withHook<T>(
    hookId: string | undefined,
    input: Record<string, unknown>,
    finish: (mapped: Record<string, unknown> | undefined) => Gated<T>,
  ): Gated<T> | Promise<Gated<T>> {
    if (hookId === undefined) return finish(undefined);
    return this.hook(hookId, input).then((mapped) => ('refused' in mapped ? { ok: false, reason: String(mapped.refused) } : finish(mapped)));
  }

  private async hook(hookId: string, input: Record<string, unknown>): Promise<Record<string, unknown> | { refused: string }> {
    const outcome = await this.call(hookId, { ...input, context: this.context });
    if (!outcome.ok) return { refused: `hook ${hookId} failed: ${outcome.failure.message}` };
    if (!isPlainObject(outcome.value)) return { refused: `hook ${hookId} returned no result object` };
    return outcome.value;
  }

  function(message: RegisterFunctionMessage): Gated<RegisterFunctionMessage> | Promise<Gated<RegisterFunctionMessage>> {
    if (!this.session.auth.allowFunctionRegistration) return { ok: false, reason: 'function registration not allowed for this session' };
    const input = {
      function_id: message.id,
      ...(message.description === undefined ? {} : { description: message.description }),
      ...(message.metadata === undefined ? {} : { metadata: message.metadata }),
    };
    return this.withHook(this.session.policy.rbac?.onFunctionRegistrationFunctionId, input, (mapped) => this.mappedFunction(message, mapped));
  }

  private mappedFunction(message: RegisterFunctionMessage, mapped: Record<string, unknown> | undefined): Gated<RegisterFunctionMessage> {
    const result: RegisterFunctionMessage = { ...message };
    if (mapped !== undefined) {
      result.id = optionalString(mapped.function_id) ?? result.id;
      const description = optionalString(mapped.description);
      if (description !== undefined) result.description = description;
      if (isPlainObject(mapped.metadata)) result.metadata = mapped.metadata;
    }
    result.id = this.session.registeredId(result.id);
    return { ok: true, message: result };
  }

  trigger(message: RegisterTriggerMessage): Gated<RegisterTriggerMessage> | Promise<Gated<RegisterTriggerMessage>> {
    const allowedTypes = this.session.auth.allowedTriggerTypes;
    if (allowedTypes !== undefined && !allowedTypes.includes(message.trigger_type)) {
      return { ok: false, reason: `trigger type '${message.trigger_type}' is not allowed for this session` };
    }
    const input = {
      trigger_id: message.id,
      trigger_type: message.trigger_type,
      function_id: message.function_id,
      config: message.config,
      ...(message.metadata === undefined ? {} : { metadata: message.metadata }),
    };
    return this.withHook(this.session.policy.rbac?.onTriggerRegistrationFunctionId, input, (mapped) => this.mappedTrigger(message, mapped));
  }

  private mappedTrigger(message: RegisterTriggerMessage, mapped: Record<string, unknown> | undefined): Gated<RegisterTriggerMessage> {
    const result: RegisterTriggerMessage = { ...message };
    if (mapped !== undefined) {
      result.id = optionalString(mapped.trigger_id) ?? result.id;
      result.trigger_type = optionalString(mapped.trigger_type) ?? result.trigger_type;
      result.function_id = optionalString(mapped.function_id) ?? result.function_id;
      if (isPlainObject(mapped.config)) result.config = mapped.config;
    }
    result.function_id = this.session.registeredId(result.function_id);
    return { ok: true, message: result };
  }

  triggerType(message: RegisterTriggerTypeMessage): Gated<RegisterTriggerTypeMessage> | Promise<Gated<RegisterTriggerTypeMessage>> {
    if (!this.session.auth.allowTriggerTypeRegistration) return { ok: false, reason: 'trigger type registration not allowed for this session' };
    const input = { trigger_type_id: message.id, description: message.description ?? '' };
    return this.withHook(this.session.policy.rbac?.onTriggerTypeRegistrationFunctionId, input, (mapped) => this.mappedTriggerType(message, mapped));
  }

  private mappedTriggerType(message: RegisterTriggerTypeMessage, mapped: Record<string, unknown> | undefined): Gated<RegisterTriggerTypeMessage> {
    const result: RegisterTriggerTypeMessage = { ...message };
    if (mapped !== undefined) {
      result.id = optionalString(mapped.trigger_type_id) ?? result.id;
      const description = optionalString(mapped.description);
      if (description !== undefined) result.description = description;
    }
    return { ok: true, message: result };
  }
}
