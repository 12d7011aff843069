import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { IpcChannel } from '../bus/ipc-channel.js';
import type { IiiModuleName } from '../config/types.js';
import type { InvocationFailure, InvocationOutcome } from '../invocation/invoker.js';
import type { EngineFunction } from '../workers/engine-functions.js';
import type { KvStore, LeaseStore } from './storage/kv-store.js';

/**
 * What an iii module (state, stream, pubsub, cron, queue) is to the engine, and what the engine gives
 * it (docs/modules.md). A module never imports another module or the engine: it gets this context.
 */

/** A trigger of a module's type, registered by any worker on any process or node of the cluster. */
export interface ModuleTrigger {
  id: string;
  triggerType: string;
  functionId: string;
  /** The worker that registered it, and the peer (engine process) that worker is connected to. */
  workerId: string;
  ownerId: string;
  config: Record<string, unknown>;
  metadata?: Record<string, unknown>;
}

export interface ModuleTriggerType {
  id: string;
  description: string;
  /**
   * Checks a `registertrigger` of this type before it is accepted; a message refuses it with iii's
   * `trigger_registration_failed` (the worker's SDK logs it). Omitted: every config is accepted.
   */
  validate?(config: Record<string, unknown>): string | undefined;
}

export interface ModuleInvokeOptions {
  /** The trigger's metadata, passed on with the call as iii does. */
  metadata?: Record<string, unknown>;
  /** Default: the HTTP module's default_timeout. */
  timeoutMs?: number;
  /** W3C trace context to hand the worker (a queued call carries its enqueuer's). */
  traceparent?: string;
  baggage?: string;
}

/**
 * Why a module's call to a worker did not run to success: too many calls still in flight (the event
 * was not called at all), no worker serves the function, or the call failed (error, timeout, worker
 * gone).
 */
export type TriggerDropReason = 'overflow' | 'no_handler' | 'failed';

export function dropReasonOf(cause: InvocationFailure | 'overflow'): TriggerDropReason {
  if (cause === 'overflow') return 'overflow';
  return cause.source === 'engine' && cause.code === 'FUNCTION_UNAVAILABLE' ? 'no_handler' : 'failed';
}

export interface ModuleContext {
  readonly logger: Logger;
  /** This process's peer id: unique in the cluster (a lease holder's name). */
  readonly peerId: string;
  /** The module's own config section, as the file gave it (validated by src/config/modules/). */
  readonly config: Readonly<Record<string, unknown>>;
  /** Calls a function wherever a worker serves it in the cluster (the engine's invoker). */
  invoke(functionId: string, data: unknown, options?: ModuleInvokeOptions): Promise<InvocationOutcome>;
  /**
   * A trigger call (state trigger, subscriber, stream trigger, cron job, or the condition before
   * one) that was dropped: counted in `switchyard_module_trigger_drops_total{module, reason}` and
   * logged at warn with `fields` and `message`, throttled per module and reason.
   */
  triggerDropped(cause: InvocationFailure | 'overflow', fields: Record<string, unknown>, message: string): void;
  /** Whether a connected worker anywhere in the cluster serves the function (iii-stream's custom streams). */
  hasFunction(functionId: string): boolean;
  /** The store this module's `adapter` names; modules naming the same store share it. */
  kvStore(): KvStore;
  /** The cluster's leases (Redis in a distributed cluster, else the primary, else this process). */
  leases(): LeaseStore;
  /** switchyard-cluster lease_ms: how long a lease outlives its holder's last renewal. */
  readonly leaseMs: number;
  /** This process's Prometheus registry (aggregated across children by the primary). */
  readonly registry: Registry;
  /** switchyard-cluster `name` and `redis_url` (a module with a store of its own, the queue, places it by these). */
  readonly cluster: { readonly name: string; readonly redisUrl?: string };
  /** A cluster child's IPC link to the primary (the queue's embedded store is held there). */
  readonly primary?: IpcChannel;
}

export interface EngineModule {
  readonly name: IiiModuleName;
  readonly triggerTypes: readonly ModuleTriggerType[];
  /** Functions the module serves, by id (`state::set`, `publish`, …). */
  readonly functions: ReadonlyMap<string, EngineFunction>;
  /** After every table rebuild: every trigger of the module's types in the cluster. */
  triggersChanged?(triggers: readonly ModuleTrigger[]): void;
  start(): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
}

export type ModuleFactory = (context: ModuleContext) => EngineModule;
