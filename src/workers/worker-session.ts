import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FunctionFilter, RbacConfig, WorkerLimits } from '../config/types.js';
import { listenerPrincipal } from '../routing/principal.js';
import { dataRecord, isPlainObject } from '../values.js';

/**
 * Worker permissions (iii's worker RBAC, docs/security.md): what one connection may call and
 * register, decided once when it connects. iii 0.22.1's rules are followed exactly where they are
 * clear (engine/src/workers/worker/rbac_config.rs and rbac_session.rs; docs/compatibility.md).
 */

/** The per-worker limits' defaults (the config schema's; used where no listener config is at hand). */
export const DEFAULT_LIMITS: WorkerLimits = Object.freeze({
  maxRegistrations: 100_000,
  maxCallsInFlight: 1000,
  maxFramesPerSecond: 100_000,
  maxQueuedBytes: 64 * 1024 * 1024,
  maxChannelsPerWorker: 64,
  maxChannels: 256,
});

/** What a worker listener applies to the connections it accepts. */
export interface ListenerPolicy {
  /** The listener's position among the `iii-worker-manager` entries: 0 is the main one. */
  index: number;
  rbac?: RbacConfig;
  middlewareFunctionId?: string;
  limits: WorkerLimits;
}

/**
 * Functions a listener with `rbac` always lets its workers call, whatever `expose_functions` says
 * (iii's infrastructure carve-out: connecting, channels, logging and baggage keep working).
 */
export const INFRASTRUCTURE_FUNCTIONS: ReadonlySet<string> = new Set([
  'engine::channels::create',
  'engine::workers::register',
  'engine::log::info',
  'engine::log::warn',
  'engine::log::error',
  'engine::log::debug',
  'engine::log::trace',
  'engine::baggage::get',
  'engine::baggage::set',
  'engine::baggage::get_all',
]);

/** `*` matches any run of characters (none included); the pattern is anchored at both ends. */
export function wildcardMatches(pattern: string, value: string): boolean {
  if (pattern === '*') return true;
  const parts = pattern.split('*');
  if (parts.length === 1) return pattern === value;
  const first = parts[0] as string;
  const last = parts[parts.length - 1] as string;
  if (!value.startsWith(first)) return false;
  let position = first.length;
  for (let i = 1; i < parts.length - 1; i++) {
    const part = parts[i] as string;
    if (part === '') continue;
    const found = value.indexOf(part, position);
    if (found === -1) return false;
    position = found + part.length;
  }
  return value.length - last.length >= position && value.endsWith(last);
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((item, i) => deepEqual(item, b[i]));
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((key) => key in b && deepEqual(a[key], b[key]));
  }
  return false;
}

export function filterMatches(filter: FunctionFilter, functionId: string, metadata: Record<string, unknown> | undefined): boolean {
  if ('match' in filter) return wildcardMatches(filter.match, functionId);
  if (metadata === undefined) return false;
  return Object.entries(filter.metadata).every(([key, condition]) => {
    if (!(key in metadata)) return false;
    const value = metadata[key];
    return 'match' in condition ? typeof value === 'string' && wildcardMatches(condition.match, value) : deepEqual(value, condition.equals);
  });
}

/** The auth function's answer (iii's AuthResult), with iii's defaults for what it leaves out. */
export interface AuthResult {
  allowedFunctions: readonly string[];
  forbiddenFunctions: readonly string[];
  /** Unset: every trigger type. */
  allowedTriggerTypes?: readonly string[];
  allowTriggerTypeRegistration: boolean;
  allowFunctionRegistration: boolean;
  context: unknown;
  functionRegistrationPrefix?: string;
}

/** A listener without an auth function lets everything in, registrations included (iii's default). */
export const OPEN_AUTH: AuthResult = Object.freeze({
  allowedFunctions: [],
  forbiddenFunctions: [],
  allowTriggerTypeRegistration: true,
  allowFunctionRegistration: true,
  context: {},
});

const stringList = (value: unknown): string[] | undefined =>
  Array.isArray(value) && value.every((item) => typeof item === 'string') ? value : undefined;

/** Reads the auth function's result as iii does (serde, with defaults): an error message when it is not one. */
export function parseAuthResult(value: unknown): AuthResult | { error: string } {
  if (value === undefined || value === null) return { error: 'auth function returned no result' };
  if (!isPlainObject(value)) return { error: 'auth function result is not an object' };
  const list = (key: string): string[] | { error: string } => {
    if (value[key] === undefined || value[key] === null) return [];
    return stringList(value[key]) ?? { error: `auth result: ${key} must be a list of strings` };
  };
  const flag = (key: string, fallback: boolean): boolean | { error: string } => {
    if (value[key] === undefined || value[key] === null) return fallback;
    return typeof value[key] === 'boolean' ? value[key] : { error: `auth result: ${key} must be a boolean` };
  };
  const allowed = list('allowed_functions');
  const forbidden = list('forbidden_functions');
  const types = value.allowed_trigger_types === undefined || value.allowed_trigger_types === null ? undefined : list('allowed_trigger_types');
  const typeRegistration = flag('allow_trigger_type_registration', false);
  const functionRegistration = flag('allow_function_registration', true);
  for (const part of [allowed, forbidden, types, typeRegistration, functionRegistration]) {
    if (typeof part === 'object' && part !== null && 'error' in part) return part;
  }
  const prefix = value.function_registration_prefix;
  if (prefix !== undefined && prefix !== null && typeof prefix !== 'string') return { error: 'auth result: function_registration_prefix must be a string' };
  return {
    allowedFunctions: allowed as string[],
    forbiddenFunctions: forbidden as string[],
    ...(types === undefined ? {} : { allowedTriggerTypes: types as string[] }),
    allowTriggerTypeRegistration: typeRegistration as boolean,
    allowFunctionRegistration: functionRegistration as boolean,
    context: value.context === undefined || value.context === null ? {} : value.context,
    ...(typeof prefix === 'string' && prefix !== '' ? { functionRegistrationPrefix: prefix } : {}),
  };
}

/**
 * The auth function's input (iii's AuthInput): lower-case header names, every query value in a list.
 * Null-prototype maps: the client names the keys before any authentication, and `?constructor=x` or
 * `?__proto__=x` must be data like any other key (on a plain object the first found Object's
 * constructor instead of a list, and the throw ended the process).
 */
export function authInput(request: IncomingMessage): { headers: Record<string, string>; query_params: Record<string, string[]>; ip_address: string } {
  const headers = dataRecord();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  const query_params = dataRecord<string[]>();
  const url = new URL(request.url ?? '/', 'http://worker.invalid');
  for (const [key, value] of url.searchParams) (query_params[key] ??= []).push(value);
  const ip = request.socket.remoteAddress ?? '';
  return { headers, query_params, ip_address: ip.startsWith('::ffff:') ? ip.slice(7) : ip };
}

/**
 * One connection's permissions. `principal` names who registered something, cluster-wide: the
 * listener, and for a listener with an auth function, the context the auth function returned (two
 * connections with the same context are the same principal: a reconnecting worker keeps its routes).
 * `restricted` connections (a listener with `rbac`) may only reach routes of their own principal with
 * `http_middleware`, and cannot join functions or routes another principal holds (docs/security.md).
 */
export class WorkerSession {
  readonly principal: string;
  readonly restricted: boolean;

  constructor(
    readonly policy: ListenerPolicy,
    readonly auth: AuthResult,
  ) {
    this.restricted = policy.rbac !== undefined;
    const listener = listenerPrincipal(policy.index, this.restricted);
    this.principal =
      policy.rbac?.authFunctionId === undefined
        ? listener
        : `${listener}:${createHash('sha256').update(canonicalJson(auth.context)).digest('base64url').slice(0, 22)}`;
  }

  get prefix(): string | undefined {
    return this.auth.functionRegistrationPrefix;
  }

  /** iii's order: forbidden, then allowed, then the infrastructure carve-out, then expose_functions. */
  mayCall(functionId: string, metadata: Record<string, unknown> | undefined): boolean {
    if (this.auth.forbiddenFunctions.includes(functionId)) return false;
    if (this.auth.allowedFunctions.includes(functionId)) return true;
    const rbac = this.policy.rbac;
    if (rbac === undefined || INFRASTRUCTURE_FUNCTIONS.has(functionId)) return true;
    return rbac.exposeFunctions.some((filter) => filterMatches(filter, functionId, metadata));
  }

  /** The refusal iii sends for a call this session may not make. */
  forbidden(functionId: string): { code: 'FORBIDDEN'; message: string } {
    const remedy = this.auth.forbiddenFunctions.includes(functionId) ? 'remove from rbac.forbidden_functions' : 'add to rbac.expose_functions';
    return { code: 'FORBIDDEN', message: `function '${functionId}' not allowed (${remedy})` };
  }

  /** The id a function this session registers is stored under (`prefix::id` with a registration prefix). */
  registeredId(id: string): string {
    return this.prefix === undefined ? id : `${this.prefix}::${id}`;
  }

  /** The id the worker knows a stored function by (the prefix taken off again). */
  workerId(id: string): string {
    const prefix = this.prefix;
    return prefix !== undefined && id.startsWith(`${prefix}::`) ? id.slice(prefix.length + 2) : id;
  }
}

/** Object keys sorted, so equal contexts hash equally whatever order the auth function built them in. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (isPlainObject(value)) {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
