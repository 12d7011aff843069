import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { WireErrorCode } from '../errors.js';
import type { HttpFunctionCaller } from '../invocation/http-function-caller.js';
import type { Invoker } from '../invocation/invoker.js';
import { encodeFrame } from '../protocol/encode.js';
import type {
  RegisterFunctionMessage,
  RegisterTriggerMessage,
  RegisterTriggerTypeMessage,
  UnregisterFunctionMessage,
  UnregisterTriggerMessage,
  UnregisterTriggerTypeMessage,
} from '../protocol/messages.js';
import type { CustomTriggerRecord, FunctionRecord, TriggerRecord, TriggerTypeRecord } from '../routing/registrations.js';
import { normalizeTriggerPaths, validateTrigger } from '../routing/trigger-config.js';
import { REGISTRATION_LIMITS } from '../protocol/limits.js';
import type { ConflictHolder } from './conflict-refusals.js';
import type { RegistrationBudget } from './registration-limits.js';
import { reservedIdProblem } from './reserved-ids.js';
import type { Gated } from './registration-gate.js';
import { RegistrationGate } from './registration-gate.js';
import { BUILT_IN_TRIGGER_TYPES, customTriggerRecord, functionRecord, triggerTypeRecord } from './registration-records.js';
import type { HubMember, WorkerHub } from './worker-hub.js';
import type { WorkerSession } from './worker-session.js';

/** Which per-worker or per-listener limit was hit, or a connection refused by an auth function (metrics: switchyard_worker_limit_hits_total{reason}). */
export type WorkerLimitKind =
  | 'registrations'
  | 'registration_bytes'
  | 'listener_registration_bytes'
  | 'reserved_id'
  | 'channels'
  | 'calls_in_flight'
  | 'frames_per_second'
  | 'queued_bytes'
  | 'listener_queued_bytes'
  | 'listener_call_bytes'
  | 'auth_refused'
  | 'connections'
  | 'unauthenticated_connections'
  | 'pending_connections'
  | 'partial_frame_bytes';

/** The frames that register or unregister something. */
export type RegistrationMessage =
  | RegisterFunctionMessage
  | UnregisterFunctionMessage
  | RegisterTriggerMessage
  | UnregisterTriggerMessage
  | RegisterTriggerTypeMessage
  | UnregisterTriggerTypeMessage;

/** Trigger types the engine's modules provide (docs/modules.md): accepted, checked, never parked. */
export interface EngineTriggerTypes {
  hasTriggerType(type: string): boolean;
  /** Why a trigger of the type is refused (`trigger_registration_failed`), or undefined. */
  validateTrigger(type: string, config: Record<string, unknown>): string | undefined;
}

export interface RegistrationDeps<C extends HubMember> {
  hub: Pick<WorkerHub<C>, 'functionAdded' | 'functionRemoved' | 'triggersChanged' | 'nextSeq'>;
  /** Runs the listener's registration hooks (served by any worker in the cluster). */
  invoker: Invoker;
  workerCallTimeoutMs: number;
  ignoreTrailingSlash: boolean;
  /** Calls HTTP-invoked functions; without it, registrations with `invocation` are refused. */
  httpFunctions?: HttpFunctionCaller;
  /** A per-worker limit refused something (metrics). */
  onLimit?: (kind: WorkerLimitKind) => void;
  /** The modules' trigger types (state, subscribe, cron, …). */
  engineTriggerTypes?: EngineTriggerTypes;
  /** The engine's own functions: a worker cannot register their ids (reserved-ids.ts). */
  engineFunctions?: { get(id: string): unknown };
  /** The process's share of registration bytes (registration-limits.ts); unset: only the per-connection bound. */
  registrationBudget?: RegistrationBudget;
  /** The listener's share in this process (max_listener_registration_bytes); unset: none beyond the process's. */
  listenerRegistrations?: RegistrationBudget;
}

/** The connection the registrations belong to, as far as they need it. */
export interface RegistrationOwner {
  readonly id: string;
  /** The socket went away: nothing more is applied. */
  readonly closed: boolean;
  /** Sends a frame to the worker; false when it is gone. */
  send(frame: string): boolean;
}

/**
 * What one worker connection registered — functions, triggers, trigger types — and how each
 * registration is admitted: the listener's RBAC gate (hooks, in the order sent), max_registrations,
 * trigger validation, and the route-ownership refusals decided cluster-wide (conflict-refusals.ts).
 */
export class WorkerRegistrations<C extends HubMember & RegistrationOwner> implements ConflictHolder {
  readonly functions = new Map<string, FunctionRecord>();
  readonly triggers = new Map<string, TriggerRecord>();
  readonly triggerTypes = new Map<string, TriggerTypeRecord>();
  /** Triggers this worker registered on worker-provided types (delivered to the type's provider). */
  readonly customTriggers = new Map<string, CustomTriggerRecord>();
  /** Registrations wait for hooks one at a time, in the order the worker sent them. */
  private chain: Promise<void> = Promise.resolve();
  private readonly gate: RegistrationGate;
  /** JSON bytes each held registration takes (`kind:id`), and their sum: REGISTRATION_LIMITS. */
  private readonly sizes = new Map<string, number>();
  private heldBytes = 0;

  constructor(
    private readonly owner: C,
    private readonly session: WorkerSession,
    private readonly deps: RegistrationDeps<C>,
    private readonly logger: Logger,
  ) {
    this.gate = new RegistrationGate(session, (functionId, data) =>
      deps.invoker.invoke(functionId, data, { deadline: performance.now() + deps.workerCallTimeoutMs }),
    );
  }

  /** One registration frame from the worker. */
  receive(message: RegistrationMessage): void {
    switch (message.type) {
      case 'registerfunction':
        this.inOrder(() => this.gate.function(message), (gated) => this.registerFunction(gated), 'function', message.id);
        return;
      case 'unregisterfunction': {
        const id = this.session.registeredId(message.id);
        this.inOrder(undefined, () => {
          this.freed('function', id);
          if (this.functions.delete(id)) this.deps.hub.functionRemoved(this.owner, id);
        });
        return;
      }
      case 'registertrigger':
        this.inOrder(() => this.gate.trigger(message), (gated) => this.registerTrigger(gated, message), 'trigger', message.id, (reason) =>
          this.refuseTrigger(message, 'FORBIDDEN', reason),
        );
        return;
      case 'unregistertrigger':
        this.inOrder(undefined, () => {
          this.freed('trigger', message.id);
          if (this.triggers.delete(message.id) || this.customTriggers.delete(message.id)) this.deps.hub.triggersChanged();
        });
        return;
      case 'registertriggertype':
        this.inOrder(() => this.gate.triggerType(message), (gated) => this.registerTriggerType(gated.id, gated.description), 'trigger type', message.id);
        return;
      case 'unregistertriggertype':
        this.inOrder(undefined, () => {
          this.freed('trigger type', message.id);
          if (this.triggerTypes.delete(message.id)) this.deps.hub.triggersChanged();
        });
        return;
    }
  }

  /**
   * Runs a registration step after the gate (hooks) has decided, in the order the worker sent them.
   * Without hooks the gate answers at once and the step runs synchronously, in the frame's turn.
   */
  private inOrder<T>(
    decide: (() => Gated<T> | Promise<Gated<T>>) | undefined,
    apply: (message: T) => void,
    what?: string,
    id?: string,
    refused?: (reason: string) => void,
  ): void {
    const settle = (gated: Gated<T> | undefined): void => {
      if (this.owner.closed) return;
      if (gated === undefined) {
        apply(undefined as T);
        return;
      }
      if (!gated.ok) {
        this.logger.warn({ kind: what, id, reason: gated.reason }, 'registration refused by the listener\'s RBAC');
        refused?.(gated.reason);
        return;
      }
      apply(gated.message);
    };
    if (!this.gate.hasHooks) {
      settle(decide?.() as Gated<T> | undefined);
      return;
    }
    this.chain = this.chain
      .then(async () => settle(this.owner.closed || decide === undefined ? undefined : await decide()))
      .catch((err: unknown) => this.logger.error({ err }, 'registration step failed'));
  }

  /** max_registrations: functions, triggers and trigger types held by this connection. */
  private room(kind: string, id: string): boolean {
    const held = this.functions.size + this.triggers.size + this.customTriggers.size + this.triggerTypes.size;
    if (held < this.session.policy.limits.maxRegistrations) return true;
    this.deps.onLimit?.('registrations');
    this.logger.warn({ kind, id, limit: this.session.policy.limits.maxRegistrations }, 'registration refused: the worker holds max_registrations already');
    return false;
  }

  /**
   * The size limits (docs/security.md#limits), checked once the gate has mapped the registration and
   * before it is stored: its id, its JSON size, the connection's and the process's totals. Takes the
   * bytes when it fits.
   */
  private fits(kind: string, id: string, message: object): boolean {
    const key = `${kind}:${id}`;
    const bytes = id.length > REGISTRATION_LIMITS.idChars ? Number.POSITIVE_INFINITY : JSON.stringify(message).length;
    const delta = bytes - (this.sizes.get(key) ?? 0);
    let problem: string | undefined;
    let limit: 'registration_bytes' | 'listener_registration_bytes' = 'registration_bytes';
    if (bytes > REGISTRATION_LIMITS.registrationBytes) problem = `a ${kind} registration over ${REGISTRATION_LIMITS.registrationBytes} bytes (or an id over ${REGISTRATION_LIMITS.idChars} characters)`;
    else if (this.heldBytes + delta > REGISTRATION_LIMITS.connectionBytes) problem = `the worker's registrations would pass ${REGISTRATION_LIMITS.connectionBytes} bytes`;
    else if (this.deps.listenerRegistrations !== undefined && !this.deps.listenerRegistrations.take(delta)) {
      problem = `this listener's registrations in this process would pass ${this.deps.listenerRegistrations.max} bytes (max_listener_registration_bytes)`;
      limit = 'listener_registration_bytes';
    } else if (this.deps.registrationBudget !== undefined && !this.deps.registrationBudget.take(delta)) {
      this.deps.listenerRegistrations?.take(-delta);
      problem = `this process's registrations would pass ${this.deps.registrationBudget.max} bytes`;
    }
    if (problem !== undefined) {
      this.deps.onLimit?.(limit);
      this.logger.warn({ kind, id: id.slice(0, 200), bytes }, `registration refused: ${problem}`);
      return false;
    }
    this.sizes.set(key, bytes);
    this.heldBytes += delta;
    return true;
  }

  /** Gives back the bytes of a registration that went. */
  private freed(kind: string, id: string): void {
    const key = `${kind}:${id}`;
    const bytes = this.sizes.get(key);
    if (bytes === undefined) return;
    this.sizes.delete(key);
    this.heldBytes -= bytes;
    this.deps.registrationBudget?.take(-bytes);
    this.deps.listenerRegistrations?.take(-bytes);
  }

  /** The connection is gone: everything it registered is given back to the process's budget. */
  release(): void {
    this.deps.registrationBudget?.take(-this.heldBytes);
    this.deps.listenerRegistrations?.take(-this.heldBytes);
    this.heldBytes = 0;
    this.sizes.clear();
  }

  private registerFunction(message: RegisterFunctionMessage): void {
    const reserved = reservedIdProblem(message.id, (id) => this.deps.engineFunctions?.get(id) !== undefined);
    if (reserved !== undefined) {
      this.deps.onLimit?.('reserved_id');
      this.logger.warn({ functionId: message.id.slice(0, 200), reason: reserved }, 'function registration refused: reserved id');
      return;
    }
    if (!this.functions.has(message.id) && !this.room('function', message.id)) return;
    const record = functionRecord(message, this.owner.id, this.deps.httpFunctions);
    if ('refused' in record) {
      this.logger.warn({ functionId: message.id, reason: record.refused }, 'HTTP-invoked function registration refused');
      return;
    }
    if (!this.fits('function', message.id, message)) return;
    record.principal = this.session.principal;
    record.registeredAt = this.functions.get(message.id)?.registeredAt ?? Date.now();
    this.functions.set(message.id, record);
    this.deps.hub.functionAdded(this.owner, message.id);
  }

  private registerTriggerType(id: string, description: string | undefined): void {
    if (BUILT_IN_TRIGGER_TYPES.has(id) || this.deps.engineTriggerTypes?.hasTriggerType(id) === true) {
      this.logger.warn({ triggerType: id }, 'a worker cannot provide a built-in trigger type; ignored');
      return;
    }
    if (!this.triggerTypes.has(id) && !this.room('trigger type', id)) return;
    if (!this.fits('trigger type', id, { id, description })) return;
    this.triggerTypes.set(id, triggerTypeRecord(id, description, this.owner.id, this.deps.hub.nextSeq()));
    this.logger.info({ triggerType: id }, 'worker provides a trigger type');
    this.deps.hub.triggersChanged();
  }

  private registerTrigger(message: RegisterTriggerMessage, asSent: RegisterTriggerMessage): void {
    const reserved = reservedIdProblem(message.function_id, () => false);
    if (reserved !== undefined) {
      this.deps.onLimit?.('reserved_id');
      this.logger.warn({ triggerId: message.id, functionId: message.function_id.slice(0, 200), reason: reserved }, 'trigger registration refused: reserved function id');
      this.refuseTrigger(asSent, 'FORBIDDEN', reserved);
      return;
    }
    const known = this.triggers.has(message.id) || this.customTriggers.has(message.id);
    if (!known && !this.room('trigger', message.id)) {
      this.refuseTrigger(asSent, 'registration_limit', `the worker holds max_registrations (${this.session.policy.limits.maxRegistrations}) already`);
      return;
    }
    const engineTypes = this.deps.engineTriggerTypes;
    if (engineTypes?.hasTriggerType(message.trigger_type) === true) {
      // A module's type (docs/modules.md): checked here, then it travels like any custom trigger and
      // the module sees it on every table rebuild. Refused as iii refuses it: trigger_registration_failed.
      const refused = engineTypes.validateTrigger(message.trigger_type, message.config);
      if (refused !== undefined) {
        this.logger.warn({ triggerId: message.id, triggerType: message.trigger_type, reason: refused }, 'trigger registration refused');
        this.refuseTrigger(asSent, 'trigger_registration_failed', refused);
        return;
      }
      this.customTriggers.set(message.id, customTriggerRecord(message, this.owner.id));
      this.deps.hub.triggersChanged();
      return;
    }
    if (!BUILT_IN_TRIGGER_TYPES.has(message.trigger_type)) {
      // A worker-provided type: kept (parked while no worker provides the type, as iii does) and
      // delivered to the provider wherever it is connected (trigger-delivery.ts). No ack, as iii.
      if (!this.triggerFits(message, asSent)) return;
      this.customTriggers.set(message.id, customTriggerRecord(message, this.owner.id));
      this.deps.hub.triggersChanged();
      return;
    }
    const config = normalizeTriggerPaths(message.trigger_type, message.config);
    const validation = validateTrigger(message.trigger_type, config, this.deps.ignoreTrailingSlash);
    if (!validation.ok) {
      this.logger.warn(
        { triggerId: message.id, triggerType: message.trigger_type, code: validation.code, reason: validation.message },
        'trigger registration refused',
      );
      this.refuseTrigger(message, validation.code, validation.message);
      return;
    }
    if (!this.triggerFits(message, asSent)) return;
    const record: TriggerRecord = {
      ...validation.spec,
      id: message.id,
      functionId: message.function_id,
      workerId: this.owner.id,
      principal: this.session.principal,
      registeredAt: Date.now(),
      seq: this.deps.hub.nextSeq(),
      ...(message.metadata === undefined ? {} : { metadata: message.metadata }),
    };
    this.triggers.set(message.id, record);
    this.deps.hub.triggersChanged();
  }

  private triggerFits(message: RegisterTriggerMessage, asSent: RegisterTriggerMessage): boolean {
    if (this.fits('trigger', message.id, message)) return true;
    this.refuseTrigger(asSent, 'registration_limit', 'the registration is over a size limit (docs/security.md#limits)');
    return false;
  }

  /** Tells the worker a trigger was refused (iii-sdk logs it); `asSent` is the registration as the worker sent it. */
  private refuseTrigger(asSent: Pick<RegisterTriggerMessage, 'id' | 'trigger_type' | 'function_id'>, code: WireErrorCode, message: string): void {
    this.owner.send(
      encodeFrame({
        type: 'triggerregistrationresult',
        id: asSent.id,
        trigger_type: asSent.trigger_type,
        function_id: asSent.function_id,
        error: { code, message },
      }),
    );
  }

  /**
   * A trigger lost a route conflict to an older binding (route-ownership.ts): it is dropped here and the
   * worker told, with iii's code for a conflicting route.
   */
  dropConflictingTrigger(triggerId: string, reason: string): void {
    const trigger = this.triggers.get(triggerId);
    if (trigger === undefined) return;
    this.triggers.delete(triggerId);
    this.freed('trigger', triggerId);
    this.logger.warn({ triggerId, functionId: trigger.functionId, reason }, 'trigger registration refused: route held by another binding');
    this.refuseTrigger({ id: triggerId, trigger_type: trigger.type, function_id: this.session.workerId(trigger.functionId) }, 'trigger_registration_failed', reason);
    this.deps.hub.triggersChanged();
  }

  /** A function lost to an older registration of the same id by another principal (route-ownership.ts). */
  dropConflictingFunction(functionId: string, reason: string): void {
    if (!this.functions.delete(functionId)) return;
    this.freed('function', functionId);
    this.logger.warn({ functionId, reason }, 'function registration refused: held by another principal');
    this.deps.hub.functionRemoved(this.owner, functionId);
  }
}
