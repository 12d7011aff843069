import { SwitchyardError } from '../errors.js';
import { isPlainObject } from '../values.js';

/**
 * Deep merge for middleware `continue` patches (docs/middleware.md#patches): objects merge key by key,
 * arrays and scalars replace. Keys that could reach a prototype are refused (dropped and counted),
 * and nesting deeper than `MAX_MERGE_DEPTH` fails the merge, so a patch can neither pollute prototypes
 * nor make the engine recurse without bound.
 */
export const MAX_MERGE_DEPTH = 32;
const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

export class MergeDepthError extends SwitchyardError {
  constructor(message: string) {
    super('MERGE_TOO_DEEP', message);
    this.name = 'MergeDepthError';
  }
}

export interface MergeReport {
  /** Keys dropped because they are `__proto__`, `constructor` or `prototype`. */
  refusedKeys: number;
}


/** A copy of a patch value, with forbidden keys dropped at every depth. */
function sanitize(value: unknown, depth: number, report: MergeReport): unknown {
  // Depth counts containers only (JSON nesting depth): a scalar inside the 32nd object is 32 levels,
  // not 33, exactly as when it is merged into an existing object.
  if (!Array.isArray(value) && !isPlainObject(value)) return value;
  if (depth > MAX_MERGE_DEPTH) throw new MergeDepthError(`patch nested deeper than ${MAX_MERGE_DEPTH}`);
  if (Array.isArray(value)) return value.map((item) => sanitize(item, depth + 1, report));
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    if (FORBIDDEN_KEYS.has(key)) {
      report.refusedKeys++;
      continue;
    }
    out[key] = sanitize(value[key], depth + 1, report);
  }
  return out;
}

function mergeInto(target: Record<string, unknown>, patch: Record<string, unknown>, depth: number, report: MergeReport): void {
  if (depth > MAX_MERGE_DEPTH) throw new MergeDepthError(`patch nested deeper than ${MAX_MERGE_DEPTH}`);
  for (const key of Object.keys(patch)) {
    if (FORBIDDEN_KEYS.has(key)) {
      report.refusedKeys++;
      continue;
    }
    const incoming = patch[key];
    const current = Object.hasOwn(target, key) ? target[key] : undefined;
    if (isPlainObject(incoming) && isPlainObject(current)) {
      mergeInto(current, incoming, depth + 1, report);
    } else {
      target[key] = sanitize(incoming, depth + 1, report);
    }
  }
}

/**
 * Merges `patch` into `target` in place (the target is the request's own copy, never shared).
 * Throws MergeDepthError when the patch is nested too deeply; `target` may then be partly merged, and
 * the caller fails the request.
 */
export function deepMerge(target: Record<string, unknown>, patch: Record<string, unknown>): MergeReport {
  const report: MergeReport = { refusedKeys: 0 };
  mergeInto(target, patch, 1, report);
  return report;
}
