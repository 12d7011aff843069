import type { MiddlewarePhase } from '../config/types.js';
import type { TriggerSpec } from './trigger-config.js';

/**
 * What one owner (a peer: one engine process) has registered. This is the unit the replicated
 * table stores and the bus publishes: plain data, no sockets.
 */
export interface FunctionRecord {
  id: string;
  workerId: string;
  description?: string;
  /** What the worker said of the function (`registerfunction`): shown by engine::functions::info. */
  metadata?: Record<string, unknown>;
  requestFormat?: unknown;
  responseFormat?: unknown;
  /** Set for an HTTP-invoked function: the engine calls this URL instead of the worker (docs/protocol.md). */
  invocation?: HttpInvocation;
  /** Who registered it (worker-session.ts); unset: the main listener. Another principal cannot join it. */
  principal?: string;
  /** Wall-clock registration time: the oldest registration of a function id holds it (docs/security.md). */
  registeredAt?: number;
}

/** An HTTP-invoked function's target, as `registerfunction`'s `invocation` gave it (iii's shape). */
export interface HttpInvocation {
  url: string;
  method: string;
  timeoutMs?: number;
  headers?: Record<string, string>;
  auth?: HttpInvocationAuth;
}

/** Secrets are named by environment variable, never carried: the engine that calls reads them. */
export type HttpInvocationAuth =
  | { type: 'hmac'; secretKey: string }
  | { type: 'bearer'; tokenKey: string }
  | { type: 'api_key'; header: string; valueKey: string };

/** A trigger type a worker provides (`registertriggertype`); the newest live one is the type's provider. */
export interface TriggerTypeRecord {
  id: string;
  workerId: string;
  description?: string;
  registeredAt: number;
  seq: number;
}

/**
 * A trigger of a type neither built in nor engine-served (not http, http_middleware): the engine keeps
 * it and delivers it to the worker providing the type, wherever it is in the cluster.
 */
export interface CustomTriggerRecord {
  id: string;
  triggerType: string;
  functionId: string;
  workerId: string;
  config: Record<string, unknown>;
  metadata?: Record<string, unknown>;
}

export type TriggerRecord = TriggerSpec & {
  id: string;
  functionId: string;
  workerId: string;
  /** Who registered it (worker-session.ts); unset: the main listener. */
  principal?: string;
  /** Wall-clock registration time, then `seq`: orders bindings across owners (the oldest holds a route). */
  registeredAt: number;
  seq: number;
  /** The trigger's `metadata`, as registered: an `http` handler gets it with every call. */
  metadata?: Record<string, unknown>;
};

/** Where a peer's forward listener is reached: a Unix socket on its own host, TCP across hosts. */
export interface PeerEndpoint {
  nodeId: string;
  socketPath?: string;
  host?: string;
  port?: number;
}

/** A connected worker as the admin view shows it (from `engine::workers::register`). */
export interface WorkerSummary {
  id: string;
  connectedAt: number;
  name?: string;
  runtime?: string;
  version?: string;
  os?: string;
  pid?: number;
  description?: string;
  ipAddress?: string;
}

/**
 * A worker that disconnected less than the reconnect grace ago: its triggers still route, and the
 * functions it served are awaited (requests wait for them to be registered again) until it expires.
 */
export interface DepartedWorker {
  workerId: string;
  /** Its principal (worker-session.ts): its functions stay held for it during the grace. */
  principal?: string;
  /** When it connected: its functions were registered no earlier (which registration is older). */
  since?: number;
  functionIds: readonly string[];
  triggers: readonly TriggerRecord[];
}

export interface OwnerSnapshot {
  ownerId: string;
  /** Only grows; a receiver keeps the newest version it has seen. */
  version: number;
  functions: readonly FunctionRecord[];
  triggers: readonly TriggerRecord[];
  /** Set for cluster peers: how to forward invocations to this owner. */
  endpoint?: PeerEndpoint;
  /** The workers behind these registrations (admin view). */
  workers?: readonly WorkerSummary[];
  /** Workers gone within the reconnect grace (see DepartedWorker). */
  departed?: readonly DepartedWorker[];
  /** Wall-clock time the owner published this version (sync-lag metric). */
  publishedAt?: number;
  /** Trigger types this owner's workers provide (absent when none). */
  triggerTypes?: readonly TriggerTypeRecord[];
  /** Triggers of worker-provided types registered by this owner's workers (absent when none). */
  customTriggers?: readonly CustomTriggerRecord[];
}

/** Sort order for bindings: older first, so the last one of a group is the newest. */
export function compareRegistration(
  a: { registeredAt: number; seq: number; ownerId: string },
  b: { registeredAt: number; seq: number; ownerId: string },
): number {
  return compareRegistrationOf(a, a.ownerId, b, b.ownerId);
}

/** `compareRegistration` of two records whose owner is held apart from them (no merged object per comparison: sorts run it often). */
export function compareRegistrationOf(a: { registeredAt: number; seq: number }, aOwner: string, b: { registeredAt: number; seq: number }, bOwner: string): number {
  if (a.registeredAt !== b.registeredAt) return a.registeredAt - b.registeredAt;
  if (aOwner !== bOwner) return aOwner < bOwner ? -1 : 1;
  return a.seq - b.seq;
}

/** A middleware as the table serves it: from an `http_middleware` trigger or from the module config. */
export interface MiddlewareBinding {
  /** Trigger id, or `config:<index>` for a RestApiModule `middleware` entry. */
  triggerId: string;
  functionId: string;
  ownerId: string;
  /** Registered through a listener with `rbac`: the middleware only runs on routes of this principal. */
  restrictedTo?: string;
  phase: MiddlewarePhase;
  scopePath?: string;
  priority: number;
  registeredAt: number;
  seq: number;
}
