import type { KvUpdateOp, KvUpdateOpError } from './kv-store.js';
import { isPlainObject } from '../../values.js';

/**
 * iii's `UpdateOp`s applied to a value (`state::update`, `stream::update`), with iii's semantics and
 * per-op error codes (read from iii's engine/src/update_ops.rs): an op that cannot apply is reported
 * with its index and skipped, the others still apply. A path is ONE field name of the top-level
 * object (`"a.b"` is the key `a.b`, as in iii); `merge` and `append` also take an array of segments.
 * Pure: no I/O; every store applies writes through this one function.
 */

const MAX_PATH_DEPTH = 32;
const MAX_SEGMENT_BYTES = 256;
const MAX_VALUE_DEPTH = 16;
const MAX_VALUE_KEYS = 1024;
const PROTO_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);
const DOC_URL = 'https://iii.dev/docs/workers/iii-state#error-codes';

type Json = unknown;
type JsonObject = Record<string, Json>;

export interface UpdateOutcome {
  value: Json;
  errors: KvUpdateOpError[];
}

/** Checks the ops' shape (iii refuses the whole call when one does not parse); a message, or undefined. */
export function invalidOps(ops: unknown): string | undefined {
  if (!Array.isArray(ops)) return 'ops must be an array';
  for (const [index, op] of ops.entries()) {
    if (!isPlainObject(op)) return `ops[${index}] must be an object`;
    const path = op.path;
    switch (op.type) {
      case 'set':
      case 'remove':
        if (typeof path !== 'string') return `ops[${index}].path must be a string`;
        break;
      case 'increment':
      case 'decrement':
        if (typeof path !== 'string') return `ops[${index}].path must be a string`;
        if (typeof op.by !== 'number' || !Number.isSafeInteger(op.by)) return `ops[${index}].by must be an integer`;
        break;
      case 'merge':
      case 'append':
        if (path !== undefined && path !== null && typeof path !== 'string' && !(Array.isArray(path) && path.every((s) => typeof s === 'string'))) {
          return `ops[${index}].path must be a string or an array of strings`;
        }
        if (!('value' in op)) return `ops[${index}].value is required`;
        break;
      default:
        return `ops[${index}].type must be one of set, merge, increment, decrement, append, remove`;
    }
  }
  return undefined;
}

function typeName(value: Json): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'object') return 'object';
  return typeof value;
}

function segmentsOf(path: string | string[] | null | undefined): string[] {
  if (path === undefined || path === null || path === '') return [];
  return typeof path === 'string' ? [path] : path;
}

function depthOf(value: Json): number {
  if (Array.isArray(value)) return 1 + Math.max(0, ...value.map(depthOf));
  if (isPlainObject(value)) return 1 + Math.max(0, ...Object.values(value).map(depthOf));
  return 0;
}

/** A deep copy of JSON data: ops mutate the copy, never the stored value. */
function clone(value: Json): Json {
  return value === undefined ? undefined : (JSON.parse(JSON.stringify(value)) as Json);
}

/** Sets a key as an own property, even `__proto__` (refused earlier, but never a prototype write). */
function put(target: JsonObject, key: string, value: Json): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function own(target: JsonObject, key: string): Json {
  return Object.prototype.hasOwnProperty.call(target, key) ? target[key] : undefined;
}

/** A value larger than the module's `max_value_bytes` (iii's VALUE_TOO_LARGE); nothing was written. */
export class ValueTooLargeError extends Error {
  readonly code = 'VALUE_TOO_LARGE';
  constructor(
    readonly size: number,
    readonly limit: number,
  ) {
    super(`value of ${size} bytes exceeds the configured max_value_bytes limit of ${limit}`);
  }
}

/** The JSON byte size of `text`, thrown as a ValueTooLargeError when it passes `limit` (undefined: no limit). */
export function checkValueSize(text: string, limit: number | undefined): void {
  if (limit === undefined) return;
  const size = Buffer.byteLength(text);
  if (size > limit) throw new ValueTooLargeError(size, limit);
}

/** Whether an error (thrown here, or carried back over IPC with its code) is a value over the limit. */
export function isValueTooLarge(err: unknown): err is Error & { code: 'VALUE_TOO_LARGE' } {
  return err instanceof Error && (err as { code?: unknown }).code === 'VALUE_TOO_LARGE';
}

export function applyUpdateOps(oldValue: Json, ops: readonly KvUpdateOp[]): UpdateOutcome {
  const errors: KvUpdateOpError[] = [];
  const fail = (opIndex: number, code: string, message: string): void => {
    errors.push({ op_index: opIndex, code, message, doc_url: DOC_URL });
  };
  let missing = oldValue === undefined || oldValue === null;
  let current: Json = missing ? {} : clone(oldValue);

  const pathOk = (name: string, index: number, segments: string[]): boolean => {
    const code = (reason: string): string => `${name}.path.${reason}`;
    if (segments.length > MAX_PATH_DEPTH) {
      fail(index, code('too_deep'), `Path depth ${segments.length} exceeds maximum of ${MAX_PATH_DEPTH}`);
      return false;
    }
    for (const segment of segments) {
      if (segment === '') {
        fail(index, code('empty_segment'), 'Path contains an empty segment');
        return false;
      }
      const bytes = Buffer.byteLength(segment);
      if (bytes > MAX_SEGMENT_BYTES) {
        fail(index, code('segment_too_long'), `Path segment of ${bytes} bytes exceeds maximum of ${MAX_SEGMENT_BYTES}`);
        return false;
      }
      if (PROTO_KEYS.has(segment)) {
        fail(index, code('proto_polluted'), `Path segment '${segment}' is not allowed (prototype pollution).`);
        return false;
      }
    }
    return true;
  };

  /** The object at `segments` under the root, created (replacing non-objects) on the way, as iii. */
  const walkOrCreate = (segments: string[]): JsonObject => {
    if (!isPlainObject(current)) current = {};
    let node = current as JsonObject;
    for (const segment of segments) {
      let next = own(node, segment);
      if (!isPlainObject(next)) {
        next = {};
        put(node, segment, next);
      }
      node = next as JsonObject;
    }
    return node;
  };

  /** Appends to an array or a string, or starts one; false (with an error) on a type mismatch. */
  const appendTo = (target: Json, value: Json, label: string, index: number): { ok: true; value: Json } | { ok: false } => {
    if (Array.isArray(target)) return { ok: true, value: [...(target as Json[]), value] };
    if (typeof target === 'string') {
      if (typeof value === 'string') return { ok: true, value: target + value };
      fail(index, 'append.type_mismatch', `Expected string append value at path '${label}', got ${typeName(value)}.`);
      return { ok: false };
    }
    if (target === null || target === undefined) return { ok: true, value: typeof value === 'string' ? value : [value] };
    fail(index, 'append.type_mismatch', `Cannot append at path '${label}': target is ${typeName(target)}, expected array, string, null, or missing field.`);
    return { ok: false };
  };

  const step = (name: 'increment' | 'decrement', index: number, path: string, by: number): void => {
    const delta = name === 'increment' ? by : -by;
    const label = path === '' ? 'root' : path;
    if (path === '') {
      if (missing) current = delta;
      else if (typeof current === 'number') current += delta;
      else return fail(index, `${name}.not_number`, `Expected number at path '${label}', got ${typeName(current)}.`);
      missing = false;
      return;
    }
    if (!isPlainObject(current)) return fail(index, `${name}.target_not_object`, `Cannot ${name} at path '${label}': target is ${typeName(current)}, expected object.`);
    const existing = own(current, path);
    if (existing === undefined) put(current, path, delta);
    else if (typeof existing === 'number') put(current, path, existing + delta);
    else return fail(index, `${name}.not_number`, `Expected number at path '${label}', got ${typeName(existing)}.`);
    missing = false;
  };

  for (const [index, op] of ops.entries()) {
    switch (op.type) {
      case 'set': {
        const segments = segmentsOf(op.path);
        if (!pathOk('set', index, segments)) continue;
        const value = clone(op.value ?? null);
        if (op.path === '') current = value;
        else if (isPlainObject(current)) put(current, op.path, value);
        else {
          fail(index, 'set.target_not_object', `Cannot set at path '${op.path}': target is ${typeName(current)}, expected object.`);
          continue;
        }
        missing = false;
        continue;
      }
      case 'merge': {
        const segments = segmentsOf(op.path);
        if (!pathOk('merge', index, segments)) continue;
        const value = op.value;
        if (!isPlainObject(value)) {
          fail(index, 'merge.value.not_an_object', 'Merge value must be a JSON object');
          continue;
        }
        const keys = Object.keys(value);
        if (keys.length > MAX_VALUE_KEYS) {
          fail(index, 'merge.value.too_many_keys', `Merge value has ${keys.length} top-level keys, exceeds maximum of ${MAX_VALUE_KEYS}`);
          continue;
        }
        const proto = keys.find((key) => PROTO_KEYS.has(key));
        if (proto !== undefined) {
          fail(index, 'merge.value.proto_polluted', `Merge value top-level key "${proto}" is a prototype-pollution sink`);
          continue;
        }
        const depth = depthOf(value);
        if (depth > MAX_VALUE_DEPTH) {
          fail(index, 'merge.value.too_deep', `Merge value JSON nesting depth ${depth} exceeds maximum of ${MAX_VALUE_DEPTH}`);
          continue;
        }
        // iii: a merge at the root needs the root to be an object already (else it is skipped, no error).
        if (segments.length === 0 && !isPlainObject(current)) continue;
        const target = segments.length === 0 ? (current as JsonObject) : walkOrCreate(segments);
        for (const key of keys) put(target, key, clone(value[key]));
        missing = false;
        continue;
      }
      case 'increment':
      case 'decrement': {
        if (!pathOk(op.type, index, segmentsOf(op.path))) continue;
        step(op.type, index, op.path, op.by);
        continue;
      }
      case 'append': {
        const segments = segmentsOf(op.path);
        if (!pathOk('append', index, segments)) continue;
        const value = clone(op.value);
        if (segments.length === 0) {
          const appended = appendTo(missing ? null : current, value, 'root', index);
          if (appended.ok) {
            current = appended.value;
            missing = false;
          }
          continue;
        }
        if (!isPlainObject(current)) {
          const label = `[${segments.join(', ')}]`;
          fail(index, 'append.target_not_object', `Cannot append at path '${label}': target is ${typeName(current)}, expected object.`);
          continue;
        }
        const leaf = segments[segments.length - 1] as string;
        const parent = segments.length === 1 ? (current as JsonObject) : walkOrCreate(segments.slice(0, -1));
        const existing = own(parent, leaf);
        if (existing === undefined) {
          // iii: a missing leaf directly under the root starts a string or an array; deeper, an array.
          put(parent, leaf, segments.length === 1 && typeof value === 'string' ? value : [value]);
        } else {
          const appended = appendTo(existing, value, leaf, index);
          if (appended.ok) put(parent, leaf, appended.value);
        }
        missing = false;
        continue;
      }
      case 'remove': {
        if (!pathOk('remove', index, segmentsOf(op.path))) continue;
        if (op.path === '') current = null;
        else if (isPlainObject(current)) delete current[op.path];
        else {
          fail(index, 'remove.target_not_object', `Cannot remove at path '${op.path}': target is ${typeName(current)}, expected object.`);
          continue;
        }
        missing = false;
        continue;
      }
    }
  }
  return { value: current, errors };
}
