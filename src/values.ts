/**
 * Checks on plain values shared by every layer (config, wire decoding, bus checks, HTTP): one
 * definition each, so a fix to one is a fix to all.
 */

/** A JSON object: not null, not an array. */
export const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * An object for keys that come from outside (header names, query and form keys, path params): it
 * inherits nothing, so `__proto__`, `constructor` or `toString` are keys like any other, as with
 * `Object.create(null)`. Its prototype is one shared, frozen, empty object whose own prototype is
 * null, rather than none: V8 keeps an `Object.create(null)` object in dictionary mode, which
 * JSON.stringify walks on its slow path (a request's headers and params: 1.07 against 0.71 µs in a
 * loop; docs/performance.md), while objects made by `new` stay in fast mode.
 */
const INHERITS_NOTHING: object = Object.freeze(Object.create(null) as object);
const DataRecord = function DataRecord(): void {
  // No state of its own: the caller adds every key.
} as unknown as new () => Record<string, unknown>;
DataRecord.prototype = INHERITS_NOTHING as Record<string, unknown>;

export const dataRecord = <T = string>(): Record<string, T> => new DataRecord() as Record<string, T>;

/** Whether `value` inherits nothing: made by dataRecord or Object.create(null). */
export const inheritsNothing = (value: object): boolean => {
  const proto = Object.getPrototypeOf(value) as object | null;
  return proto === null || proto === INHERITS_NOTHING;
};

/** RFC 9110 token: what an HTTP method or a header name may consist of. */
export const HTTP_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * Where two versions of a list differ, records compared by identity: `before[head, endBefore)` was
 * replaced by `after[head, endAfter)`, and everything outside those spans is the same objects on both
 * sides. An append, a removal or a replacement of records lying together costs a walk of pointer
 * comparisons.
 */
export function changedSpan<T>(before: readonly T[], after: readonly T[]): { head: number; endBefore: number; endAfter: number } {
  let head = 0;
  const shorter = Math.min(before.length, after.length);
  while (head < shorter && before[head] === after[head]) head++;
  let endBefore = before.length;
  let endAfter = after.length;
  while (endBefore > head && endAfter > head && before[endBefore - 1] === after[endAfter - 1]) {
    endBefore--;
    endAfter--;
  }
  return { head, endBefore, endAfter };
}
