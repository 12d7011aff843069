import type { MiddlewarePhase } from '../config/types.js';
import type {
  CustomTriggerRecord,
  DepartedWorker,
  FunctionRecord,
  HttpInvocation,
  OwnerSnapshot,
  PeerEndpoint,
  TriggerRecord,
  TriggerTypeRecord,
  WorkerSummary,
} from '../routing/registrations.js';

/**
 * A peer's snapshot as it travels on the bus (protocol version 1, bus-messages.ts): the wire's own
 * types, written out field by field from the internal records by `toWireSnapshot`, and read back by
 * `checkSnapshot` (snapshot-check.ts). Renaming an internal field is a compile error here, not a
 * silent change of the wire; `test/unit/wire-samples.test.ts` decodes a frozen sample of each message.
 * Parsed path patterns never travel: receivers parse `apiPath` themselves.
 */
export interface WireFunction {
  id: string;
  workerId: string;
  principal?: string;
  registeredAt?: number;
  description?: string;
  metadata?: Record<string, unknown>;
  requestFormat?: unknown;
  responseFormat?: unknown;
  invocation?: {
    url: string;
    method: string;
    timeoutMs?: number;
    headers?: Record<string, string>;
    auth?: { type: 'hmac'; secretKey: string } | { type: 'bearer'; tokenKey: string } | { type: 'api_key'; header: string; valueKey: string };
  };
}

interface WireTriggerBase {
  id: string;
  functionId: string;
  workerId: string;
  principal?: string;
  registeredAt: number;
  seq: number;
  metadata?: Record<string, unknown>;
}

export type WireTrigger =
  | (WireTriggerBase & {
      type: 'http';
      http: { apiPath: string; httpMethod: string; conditionFunctionId?: string; middlewareFunctionIds?: readonly string[] };
    })
  | (WireTriggerBase & { type: 'http_middleware'; middleware: { phase: MiddlewarePhase; priority: number; scopePath?: string } });

export interface WireWorker {
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

export interface WireSnapshot {
  ownerId: string;
  version: number;
  functions: readonly WireFunction[];
  triggers: readonly WireTrigger[];
  endpoint?: { nodeId: string; socketPath?: string; host?: string; port?: number };
  workers?: readonly WireWorker[];
  departed?: readonly { workerId: string; principal?: string; since?: number; functionIds: readonly string[]; triggers: readonly WireTrigger[] }[];
  publishedAt?: number;
  triggerTypes?: readonly { id: string; workerId: string; description?: string; registeredAt: number; seq: number }[];
  customTriggers?: readonly {
    id: string;
    triggerType: string;
    functionId: string;
    workerId: string;
    config: Record<string, unknown>;
    metadata?: Record<string, unknown>;
  }[];
}

/** Copies only the keys whose value is defined (the wire omits what is unset). */
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as T;
}

function wireInvocation(invocation: HttpInvocation): NonNullable<WireFunction['invocation']> {
  const { auth } = invocation;
  return defined({
    url: invocation.url,
    method: invocation.method,
    timeoutMs: invocation.timeoutMs,
    headers: invocation.headers,
    auth:
      auth === undefined
        ? undefined
        : auth.type === 'hmac'
          ? { type: 'hmac' as const, secretKey: auth.secretKey }
          : auth.type === 'bearer'
            ? { type: 'bearer' as const, tokenKey: auth.tokenKey }
            : { type: 'api_key' as const, header: auth.header, valueKey: auth.valueKey },
  });
}

function wireFunction(fn: FunctionRecord): WireFunction {
  return defined({
    id: fn.id,
    workerId: fn.workerId,
    principal: fn.principal,
    registeredAt: fn.registeredAt,
    description: fn.description,
    metadata: fn.metadata,
    requestFormat: fn.requestFormat,
    responseFormat: fn.responseFormat,
    invocation: fn.invocation === undefined ? undefined : wireInvocation(fn.invocation),
  });
}

function wireTrigger(trigger: TriggerRecord): WireTrigger {
  const base = defined({
    id: trigger.id,
    functionId: trigger.functionId,
    workerId: trigger.workerId,
    principal: trigger.principal,
    registeredAt: trigger.registeredAt,
    seq: trigger.seq,
    metadata: trigger.metadata,
  });
  if (trigger.type === 'http') {
    const { apiPath, httpMethod, conditionFunctionId, middlewareFunctionIds } = trigger.http;
    return { ...base, type: 'http', http: defined({ apiPath, httpMethod, conditionFunctionId, middlewareFunctionIds }) };
  }
  const { phase, priority, scopePath } = trigger.middleware;
  return { ...base, type: 'http_middleware', middleware: defined({ phase, priority, scopePath }) };
}

function wireWorker(worker: WorkerSummary): WireWorker {
  const { id, connectedAt, name, runtime, version, os, pid, description, ipAddress } = worker;
  return defined({ id, connectedAt, name, runtime, version, os, pid, description, ipAddress });
}

function wireEndpoint(endpoint: PeerEndpoint): NonNullable<WireSnapshot['endpoint']> {
  const { nodeId, socketPath, host, port } = endpoint;
  return defined({ nodeId, socketPath, host, port });
}

function wireTriggerType(type: TriggerTypeRecord): NonNullable<WireSnapshot['triggerTypes']>[number] {
  const { id, workerId, description, registeredAt, seq } = type;
  return defined({ id, workerId, description, registeredAt, seq });
}

function wireCustomTrigger(trigger: CustomTriggerRecord): NonNullable<WireSnapshot['customTriggers']>[number] {
  const { id, triggerType, functionId, workerId, config, metadata } = trigger;
  return defined({ id, triggerType, functionId, workerId, config, metadata });
}

function wireDeparted(d: DepartedWorker): NonNullable<WireSnapshot['departed']>[number] {
  return defined({ workerId: d.workerId, principal: d.principal, since: d.since, functionIds: [...d.functionIds], triggers: d.triggers.map(wireTrigger) });
}

/**
 * Each record's wire form, made once: records are never changed once made (a change is a new record),
 * so a publication converts only the records that are new since the last one, and the bus's diff
 * (wire-delta.ts) finds the others unchanged by identity. Without it every publication converted and
 * serialised every record of the process: a cost growing with its table (docs/scale.md).
 */
function once<R extends object, W>(convert: (record: R) => W): (record: R) => W {
  const made = new WeakMap<R, W>();
  return (record) => {
    let wire = made.get(record);
    if (wire === undefined) {
      wire = convert(record);
      made.set(record, wire);
    }
    return wire;
  };
}

const wireFunctionOnce = once(wireFunction);
const wireTriggerOnce = once(wireTrigger);
const wireWorkerOnce = once(wireWorker);
const wireDepartedOnce = once(wireDeparted);
const wireTriggerTypeOnce = once(wireTriggerType);
const wireCustomTriggerOnce = once(wireCustomTrigger);

export function toWireSnapshot(snapshot: OwnerSnapshot): WireSnapshot {
  return defined({
    ownerId: snapshot.ownerId,
    version: snapshot.version,
    functions: snapshot.functions.map(wireFunctionOnce),
    triggers: snapshot.triggers.map(wireTriggerOnce),
    endpoint: snapshot.endpoint === undefined ? undefined : wireEndpoint(snapshot.endpoint),
    workers: snapshot.workers?.map(wireWorkerOnce),
    departed: snapshot.departed?.map(wireDepartedOnce),
    publishedAt: snapshot.publishedAt,
    triggerTypes: snapshot.triggerTypes?.map(wireTriggerTypeOnce),
    customTriggers: snapshot.customTriggers?.map(wireCustomTriggerOnce),
  });
}
