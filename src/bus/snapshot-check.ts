import type {
  CustomTriggerRecord,
  DepartedWorker,
  FunctionRecord,
  OwnerSnapshot,
  PeerEndpoint,
  TriggerRecord,
  TriggerTypeRecord,
  WorkerSummary,
} from '../routing/registrations.js';
import { checkInvocation } from '../routing/http-invocation.js';
import { validateTrigger } from '../routing/trigger-config.js';
import { changedSpan, isPlainObject } from '../values.js';

/**
 * A peer's snapshot is checked field by field before it reaches the table, and its triggers are
 * validated again from their plain config (patterns are re-parsed here, never taken from the wire):
 * one bad or hostile message must not be able to crash every process that receives it.
 */
export type SnapshotCheck = { ok: true; snapshot: OwnerSnapshot } | { ok: false; reason: string };

type Obj = Record<string, unknown>;
const isObject = isPlainObject;
const isText = (v: unknown): v is string => typeof v === 'string' && v.length > 0;
const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/**
 * Checked records by the wire object they came from. A receiver of deltas hands the table the same
 * record objects again on every change of a peer (wire-delta.ts): each is checked — its route pattern
 * parsed — once, not once per change, and the table gets the same checked object each time, so its
 * diff by identity (owner-index.ts) sees only the records that changed. Wire objects are never
 * mutated after they are parsed.
 */
type Cache<T> = WeakMap<object, T | string>;

function once<T>(cache: Cache<T>, v: unknown, check: (v: unknown) => T | string): T | string {
  if (!isObject(v)) return check(v);
  let checked = cache.get(v);
  if (checked === undefined) {
    checked = check(v);
    cache.set(v, checked);
  }
  return checked;
}

/** A cache and its check for each `ignoreTrailingSlash` (false, true): a trigger's pattern depends on it. */
function bySlash<T>(check: (v: unknown, ignoreTrailingSlash: boolean) => T | string): { cache: Cache<T>; check: (v: unknown) => T | string }[] {
  return [false, true].map((slash) => ({ cache: new WeakMap<object, T | string>(), check: (v: unknown) => check(v, slash) }));
}

const functionCache: Cache<FunctionRecord> = new WeakMap();
const triggerChecks = bySlash(checkTriggerOnce);
const departedChecks = bySlash(checkDepartedOnce);
const workerCache: Cache<WorkerSummary> = new WeakMap();

function checkFunction(v: unknown): FunctionRecord | string {
  return once(functionCache, v, checkFunctionOnce);
}

function checkTrigger(v: unknown, ignoreTrailingSlash: boolean): TriggerRecord | string {
  const { cache, check } = triggerChecks[ignoreTrailingSlash ? 1 : 0] as (typeof triggerChecks)[number];
  return once(cache, v, check);
}

/** A departed worker's claims, checked once per wire object like the records (its triggers through `checkTrigger`). */
function checkDeparted(v: unknown, ignoreTrailingSlash: boolean): DepartedWorker | string {
  const { cache, check } = departedChecks[ignoreTrailingSlash ? 1 : 0] as (typeof departedChecks)[number];
  return once(cache, v, check);
}

function checkFunctionOnce(v: unknown): FunctionRecord | string {
  if (!isObject(v) || !isText(v.id) || typeof v.workerId !== 'string') return 'function needs id and workerId';
  const record: FunctionRecord = { id: v.id, workerId: v.workerId };
  if (typeof v.description === 'string') record.description = v.description;
  if (isObject(v.metadata)) record.metadata = v.metadata;
  if (isText(v.principal)) record.principal = v.principal;
  if (isNumber(v.registeredAt)) record.registeredAt = v.registeredAt;
  if (v.requestFormat !== undefined) record.requestFormat = v.requestFormat;
  if (v.responseFormat !== undefined) record.responseFormat = v.responseFormat;
  if (v.invocation !== undefined) {
    const invocation = checkInvocation(v.invocation);
    if (typeof invocation === 'string') return `function ${v.id}: ${invocation}`;
    record.invocation = invocation;
  }
  return record;
}

function checkTriggerType(v: unknown): TriggerTypeRecord | string {
  if (!isObject(v) || !isText(v.id) || !isText(v.workerId) || !isNumber(v.registeredAt) || !isNumber(v.seq)) {
    return 'trigger type needs id, workerId, registeredAt and seq';
  }
  const record: TriggerTypeRecord = { id: v.id, workerId: v.workerId, registeredAt: v.registeredAt, seq: v.seq };
  if (typeof v.description === 'string') record.description = v.description;
  return record;
}

function checkCustomTrigger(v: unknown): CustomTriggerRecord | string {
  if (!isObject(v) || !isText(v.id) || !isText(v.triggerType) || !isText(v.functionId) || !isText(v.workerId) || !isObject(v.config)) {
    return 'worker-provided trigger needs id, triggerType, functionId, workerId and an object config';
  }
  const record: CustomTriggerRecord = { id: v.id, triggerType: v.triggerType, functionId: v.functionId, workerId: v.workerId, config: v.config };
  if (isObject(v.metadata)) record.metadata = v.metadata;
  return record;
}

/**
 * The records of one list checked. With `since` (the same list of the owner's snapshot checked before,
 * and what that check returned, one record for one), only the records between the head and tail the
 * two lists share by identity are checked: a peer's snapshot materialised from deltas (wire-delta.ts)
 * is the records held before plus the few that changed, so the rest is pointer comparisons, not a
 * cache lookup per record. `lossy`: a bad record is dropped instead of refusing the list.
 */
function checkRecords<T>(raw: readonly unknown[], check: (v: unknown) => T | string, since?: Since<T>, lossy = false): T[] | string {
  let head = 0;
  let endBefore = 0;
  let endAfter = raw.length;
  let before: readonly T[] = [];
  if (since !== undefined && since.raw.length === since.checked.length) {
    ({ head, endBefore, endAfter } = changedSpan(since.raw, raw));
    before = since.checked;
  }
  const out = before.slice(0, head);
  for (let i = head; i < endAfter; i++) {
    const checked = check(raw[i]);
    if (typeof checked !== 'string') out.push(checked);
    else if (!lossy) return checked;
  }
  for (let i = endBefore; i < before.length; i++) out.push(before[i] as T);
  return out;
}

/** A list as checked before: the wire records and what their check returned. */
interface Since<T> {
  raw: readonly unknown[];
  checked: readonly T[];
}

/** An optional list of records: absent is empty; one bad entry rejects the snapshot. */
function checkList<T>(raw: unknown, what: string, check: (v: unknown) => T | string, since?: Since<T>): T[] | string {
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) return `snapshot ${what} must be an array`;
  return checkRecords(raw, check, since);
}

/** The trigger's config as a worker would have sent it, rebuilt from the record. */
function plainConfig(v: Obj): { type: string; config: Obj } | string {
  if (v.type === 'http' && isObject(v.http)) {
    const h = v.http;
    return {
      type: 'http',
      config: {
        api_path: h.apiPath,
        http_method: h.httpMethod,
        condition_function_id: h.conditionFunctionId,
        middleware_function_ids: h.middlewareFunctionIds,
      },
    };
  }
  if (v.type === 'http_middleware' && isObject(v.middleware)) {
    const m = v.middleware;
    return {
      type: 'http_middleware',
      config: { phase: m.phase, priority: m.priority, scope: m.scopePath === undefined ? undefined : { path: m.scopePath } },
    };
  }
  return `unknown trigger type ${JSON.stringify(v.type)}`;
}

function checkTriggerOnce(v: unknown, ignoreTrailingSlash: boolean): TriggerRecord | string {
  if (!isObject(v) || !isText(v.id) || !isText(v.functionId) || typeof v.workerId !== 'string') {
    return 'trigger needs id, functionId and workerId';
  }
  if (!isNumber(v.registeredAt) || !isNumber(v.seq)) return 'trigger needs numeric registeredAt and seq';
  const plain = plainConfig(v);
  if (typeof plain === 'string') return plain;
  const validation = validateTrigger(plain.type, plain.config, ignoreTrailingSlash);
  if (!validation.ok) return validation.message;
  // Built field by field, not spread: this runs for every record a peer sends, and spreading the
  // spec and the optional fields made it the costliest line of a bus message's check.
  const spec = validation.spec;
  const { id, functionId, workerId, registeredAt, seq } = v;
  const record: TriggerRecord =
    spec.type === 'http'
      ? { type: 'http', http: spec.http, id, functionId, workerId, registeredAt, seq }
      : { type: 'http_middleware', middleware: spec.middleware, id, functionId, workerId, registeredAt, seq };
  if (isText(v.principal)) record.principal = v.principal;
  if (isObject(v.metadata)) record.metadata = v.metadata;
  return record;
}

/** Worker summaries are informational: malformed entries are dropped, not fatal. */
function checkWorkers(v: unknown, since?: Since<WorkerSummary>): WorkerSummary[] {
  if (!Array.isArray(v)) return [];
  return checkRecords(v, (item) => once(workerCache, item, checkWorkerOnce), since, true) as WorkerSummary[];
}

function checkWorkerOnce(item: unknown): WorkerSummary | string {
  if (!isObject(item) || !isText(item.id) || !isNumber(item.connectedAt)) return 'dropped';
  const summary: WorkerSummary = { id: item.id, connectedAt: item.connectedAt };
  if (typeof item.name === 'string') summary.name = item.name;
  if (typeof item.runtime === 'string') summary.runtime = item.runtime;
  if (typeof item.version === 'string') summary.version = item.version;
  if (typeof item.os === 'string') summary.os = item.os;
  if (isNumber(item.pid)) summary.pid = item.pid;
  if (typeof item.description === 'string') summary.description = item.description;
  if (typeof item.ipAddress === 'string') summary.ipAddress = item.ipAddress;
  return summary;
}

function checkDepartedOnce(v: unknown, ignoreTrailingSlash: boolean): DepartedWorker | string {
  if (!isObject(v) || !isText(v.workerId) || !Array.isArray(v.functionIds) || !Array.isArray(v.triggers)) {
    return 'departed worker needs workerId, functionIds and triggers';
  }
  if (!v.functionIds.every(isText)) return 'departed functionIds must be strings';
  const triggers: TriggerRecord[] = [];
  for (const item of v.triggers) {
    const checked = checkTrigger(item, ignoreTrailingSlash);
    if (typeof checked === 'string') return checked;
    triggers.push(checked);
  }
  return {
    workerId: v.workerId,
    ...(isText(v.principal) ? { principal: v.principal } : {}),
    ...(isNumber(v.since) ? { since: v.since } : {}),
    functionIds: v.functionIds,
    triggers,
  };
}

function checkEndpoint(v: unknown): PeerEndpoint | string {
  if (!isObject(v) || !isText(v.nodeId)) return 'endpoint needs nodeId';
  const endpoint: PeerEndpoint = { nodeId: v.nodeId };
  if (v.socketPath !== undefined) {
    if (!isText(v.socketPath)) return 'endpoint socketPath must be a string';
    endpoint.socketPath = v.socketPath;
  }
  if (v.host !== undefined || v.port !== undefined) {
    if (!isText(v.host) || !Number.isInteger(v.port) || (v.port as number) < 1 || (v.port as number) > 65535) {
      return 'endpoint host/port invalid';
    }
    endpoint.host = v.host;
    endpoint.port = v.port as number;
  }
  return endpoint;
}

export function checkSnapshot(raw: unknown, ignoreTrailingSlash: boolean): SnapshotCheck {
  return checkSince(raw, ignoreTrailingSlash, undefined);
}

/** The wire snapshot an owner's checked snapshot came from (SnapshotChecker). */
interface Checked {
  raw: Obj;
  snapshot: OwnerSnapshot;
}

/** The same list of the snapshot checked before, when there is one. */
function sinceOf<T>(before: Checked | undefined, raw: unknown, checked: readonly T[] | undefined): Since<T> | undefined {
  if (before === undefined || !Array.isArray(raw) || checked === undefined) return undefined;
  return { raw, checked };
}

function checkSince(raw: unknown, ignoreTrailingSlash: boolean, before: Checked | undefined): SnapshotCheck {
  if (!isObject(raw) || !isText(raw.ownerId) || !isNumber(raw.version)) return { ok: false, reason: 'snapshot needs ownerId and version' };
  if (!Array.isArray(raw.functions) || !Array.isArray(raw.triggers)) return { ok: false, reason: 'snapshot needs functions and triggers arrays' };
  const held = before?.snapshot;
  const functions = checkRecords(raw.functions, checkFunction, sinceOf(before, before?.raw.functions, held?.functions));
  if (typeof functions === 'string') return { ok: false, reason: functions };
  const triggers = checkRecords(raw.triggers, (v) => checkTrigger(v, ignoreTrailingSlash), sinceOf(before, before?.raw.triggers, held?.triggers));
  if (typeof triggers === 'string') return { ok: false, reason: triggers };
  const workers = checkWorkers(raw.workers, sinceOf(before, before?.raw.workers, held?.workers));
  const snapshot: OwnerSnapshot = { ownerId: raw.ownerId, version: raw.version, functions, triggers, workers };
  if (isNumber(raw.publishedAt)) snapshot.publishedAt = raw.publishedAt;
  if (raw.departed !== undefined) {
    if (!Array.isArray(raw.departed)) return { ok: false, reason: 'snapshot departed must be an array' };
    const departed = checkRecords(raw.departed, (v) => checkDeparted(v, ignoreTrailingSlash), sinceOf(before, before?.raw.departed, held?.departed));
    if (typeof departed === 'string') return { ok: false, reason: departed };
    if (departed.length > 0) snapshot.departed = departed;
  }
  const triggerTypes = checkList(raw.triggerTypes, 'triggerTypes', checkTriggerType, sinceOf(before, before?.raw.triggerTypes, held?.triggerTypes));
  if (typeof triggerTypes === 'string') return { ok: false, reason: triggerTypes };
  if (triggerTypes.length > 0) snapshot.triggerTypes = triggerTypes;
  const customTriggers = checkList(raw.customTriggers, 'customTriggers', checkCustomTrigger, sinceOf(before, before?.raw.customTriggers, held?.customTriggers));
  if (typeof customTriggers === 'string') return { ok: false, reason: customTriggers };
  if (customTriggers.length > 0) snapshot.customTriggers = customTriggers;
  if (raw.endpoint !== undefined) {
    const endpoint = checkEndpoint(raw.endpoint);
    if (typeof endpoint === 'string') return { ok: false, reason: endpoint };
    snapshot.endpoint = endpoint;
  }
  return { ok: true, snapshot };
}

/**
 * One receiver's checks of its peers' snapshots (cluster membership): it keeps, per owner, the last
 * wire snapshot that passed and what the check made of it, so the owner's next snapshot re-checks
 * only the records between the lists' shared head and tail (checkRecords). Each change of a peer then
 * costs what changed plus a walk of pointer comparisons, instead of a cache lookup for each of the
 * peer's records (docs/scale.md). The outcome is the one `checkSnapshot` gives: records are checked by
 * the same functions, and wire objects are never mutated after they are parsed.
 */
export class SnapshotChecker {
  private readonly last = new Map<string, Checked>();

  /**
   * `remember`: whether snapshots of one peer share their unchanged records (Bus.recordsShared). When
   * they do not (each is parsed anew), nothing would be saved, and holding the last wire snapshot of
   * every peer would only keep a second copy of its records alive: then every snapshot is checked whole.
   */
  constructor(
    private readonly ignoreTrailingSlash: boolean,
    private readonly remember = true,
  ) {}

  check(raw: unknown): SnapshotCheck {
    const before = isObject(raw) && typeof raw.ownerId === 'string' ? this.last.get(raw.ownerId) : undefined;
    const checked = checkSince(raw, this.ignoreTrailingSlash, before);
    if (checked.ok && this.remember) this.last.set(checked.snapshot.ownerId, { raw: raw as Obj, snapshot: checked.snapshot });
    return checked;
  }

  /** The owner is gone (or its snapshot was not applied): its next snapshot is checked whole. */
  forget(ownerId: string): void {
    this.last.delete(ownerId);
  }

  /** Owners held (tests: nothing stays of owners forgotten). */
  get size(): number {
    return this.last.size;
  }
}
