/**
 * Checks on plain values shared by every layer (config, wire decoding, bus checks, HTTP): one
 * definition each, so a fix to one is a fix to all.
 */

/** A JSON object: not null, not an array. */
export const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

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
