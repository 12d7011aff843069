/**
 * Route path patterns: `/users/:id/posts`. A `:name` segment captures one non-empty segment; every
 * other segment is literal (docs/routing.md). Parsing happens once per registration, never per request.
 */
export type PatternSegment = { kind: 'static'; value: string } | { kind: 'param'; name: string };

export interface PathPattern {
  /** The pattern as registered (`/users/:id`). */
  source: string;
  segments: readonly PatternSegment[];
  /** Parameter names in segment order. */
  paramNames: readonly string[];
  /** Shape with parameter names erased (`/users/:`): two patterns of one shape match the same paths. */
  shapeKey: string;
}

const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export type PatternParseResult = { ok: true; pattern: PathPattern } | { ok: false; message: string };

/** Splits a path into segments after the leading `/`; `"/"` is one empty segment. */
export function splitPath(path: string): string[] {
  return path.slice(1).split('/');
}

/** With `ignoreTrailingSlash`, `/a/` and `/a` are one route: the trailing empty segment is dropped. */
export function normalizeTrailingSlash(path: string, ignoreTrailingSlash: boolean): string {
  if (!ignoreTrailingSlash || path.length <= 1 || !path.endsWith('/')) return path;
  let end = path.length;
  while (end > 1 && path.charCodeAt(end - 1) === 47 /* / */) end--;
  return path.slice(0, end);
}

/**
 * A worker's api_path or scope path as iii 0.22.1 reads it: the leading slash is optional
 * (`test/hello` is `/test/hello`) and several leading slashes count as one; the rest stays as written
 * (inner and trailing slashes are significant). Applied where workers register, not on the bus.
 */
export function normalizeApiPath(path: string): string {
  let start = 0;
  while (path.charCodeAt(start) === 47 /* / */) start++;
  return `/${path.slice(start)}`;
}

/**
 * Patterns parsed lately, by source, for each `ignoreTrailingSlash` (false, true). A route's pattern is
 * parsed where its worker registers and again on every node that receives it (bus deltas carry plain
 * configs), and reconnecting workers register the same paths again and again: a peer's change then
 * costs a lookup per route instead of a parse. Results are immutable and shared. Bounded: the oldest
 * entry goes when a new one would pass PARSED_MAX (unique paths, such as probes', cycle through).
 */
const PARSED_MAX = 512;
const parsed = [new Map<string, PatternParseResult>(), new Map<string, PatternParseResult>()] as const;

export function parsePathPattern(source: string, ignoreTrailingSlash: boolean): PatternParseResult {
  if (typeof source !== 'string') return parseUncached(source, ignoreTrailingSlash);
  const cache = parsed[ignoreTrailingSlash ? 1 : 0];
  let result = cache.get(source);
  if (result === undefined) {
    result = parseUncached(source, ignoreTrailingSlash);
    if (cache.size >= PARSED_MAX) cache.delete(cache.keys().next().value as string);
    cache.set(source, result);
  }
  return result;
}

function parseUncached(source: string, ignoreTrailingSlash: boolean): PatternParseResult {
  if (typeof source !== 'string' || !source.startsWith('/')) {
    return { ok: false, message: 'api_path must be a string starting with "/"' };
  }
  if (source.includes('?') || source.includes('#')) {
    return { ok: false, message: 'api_path must not contain "?" or "#"' };
  }
  if (/[\s]/.test(source)) return { ok: false, message: 'api_path must not contain whitespace' };
  const normalized = normalizeTrailingSlash(source, ignoreTrailingSlash);
  const segments: PatternSegment[] = [];
  const paramNames: string[] = [];
  const shape: string[] = [];
  for (const raw of splitPath(normalized)) {
    if (raw.startsWith(':')) {
      const name = raw.slice(1);
      if (!PARAM_NAME.test(name)) return { ok: false, message: `invalid parameter segment "${raw}" in api_path` };
      if (paramNames.includes(name)) return { ok: false, message: `duplicate parameter "${name}" in api_path` };
      paramNames.push(name);
      segments.push({ kind: 'param', name });
      shape.push(':');
    } else {
      let value: string;
      try {
        value = decodeURIComponent(raw);
      } catch {
        return { ok: false, message: `invalid percent-encoding in api_path segment "${raw}"` };
      }
      segments.push({ kind: 'static', value });
      // Escape a literal ':' so it cannot collide with a parameter, and a '/' decoded from `%2F` so
      // `/a%2Fb` (one segment) and `/a/b` (two segments) keep different shapes: they match different paths.
      shape.push(value.replace(/[:\\/]/g, '\\$&'));
    }
  }
  return { ok: true, pattern: Object.freeze({ source, segments: Object.freeze(segments), paramNames: Object.freeze(paramNames), shapeKey: '/' + shape.join('/') }) };
}
