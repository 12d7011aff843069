import type { MiddlewarePhase } from '../config/types.js';
import type { MiddlewareBinding } from './registrations.js';
import { compareRegistration } from './registrations.js';
import { normalizeTrailingSlash, splitPath } from './path-pattern.js';

/**
 * Selects the middleware of a phase that cover a path (docs/middleware.md#scope), through a segment
 * trie built once per table change. A path no scope covers costs a few map lookups and allocates
 * nothing; there is never a scan over every middleware.
 *
 * Scope `P` covers `P` and everything under `P/`; `P/*` covers everything under `P/` but not `P`;
 * a `:name` segment matches any one non-empty segment; no scope covers every request.
 */
type PhaseLists = Partial<Record<MiddlewarePhase, MiddlewareBinding[]>>;

interface ScopeNode {
  statics: Map<string, ScopeNode> | undefined;
  param: ScopeNode | undefined;
  /** Scopes ending here without `/*`: they cover this node and all below. */
  inclusive: PhaseLists | undefined;
  /** Scopes ending here with `/*`: they cover strictly below. */
  below: PhaseLists | undefined;
}

/**
 * Segments are compared decoded, exactly as the router compares them: otherwise `/%61dmin` would reach
 * an `/admin` route while slipping past an `/admin`-scoped auth middleware. A segment that does not
 * decode is kept raw (the router answers that request 400 anyway).
 */
function decodeSegment(segment: string): string {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

const newNode = (): ScopeNode => ({ statics: undefined, param: undefined, inclusive: undefined, below: undefined });
const EMPTY: readonly MiddlewareBinding[] = Object.freeze([]);

function addTo(lists: PhaseLists, binding: MiddlewareBinding): void {
  (lists[binding.phase] ??= []).push(binding);
}

/** Phase order: ascending priority, then registration order (stable across processes). */
export function compareMiddleware(a: MiddlewareBinding, b: MiddlewareBinding): number {
  return a.priority - b.priority || compareRegistration(a, b);
}

/** Paths whose selections are kept (per index, so per table version); past it the cache starts over. */
const SELECTION_CACHE_PATHS = 1024;
/** Longer paths are selected every time: the cache holds at most ~256 KiB of keys. */
const SELECTION_CACHE_PATH_LENGTH = 256;
type Selections = Partial<Record<MiddlewarePhase, readonly MiddlewareBinding[]>>;

export class MiddlewareIndex {
  private readonly global: PhaseLists = {};
  private readonly root: ScopeNode = newNode();
  private readonly scoped: boolean;
  /**
   * Selections by path: a request asks for up to five phases of one path, and traffic repeats paths.
   * The index never changes (a table change builds a new one), so an entry never goes stale; the
   * bound keeps paths that never repeat from growing it.
   */
  private readonly selections = new Map<string, Selections>();
  /** Every binding in execution order, whatever its phase and scope (for the admin view and tests). */
  readonly ordered: readonly MiddlewareBinding[];
  /** Some binding runs only on its own principal's routes (registered through a listener with `rbac`). */
  readonly hasRestricted: boolean;

  constructor(
    bindings: readonly MiddlewareBinding[],
    private readonly ignoreTrailingSlash: boolean,
  ) {
    let scoped = false;
    for (const binding of bindings) {
      if (binding.scopePath === undefined || binding.scopePath === '/' || binding.scopePath === '/*') {
        addTo(this.global, binding);
        continue;
      }
      scoped = true;
      this.insert(binding, binding.scopePath);
    }
    for (const list of Object.values(this.global)) list.sort(compareMiddleware);
    this.scoped = scoped;
    this.ordered = [...bindings].sort(compareMiddleware);
    this.hasRestricted = bindings.some((binding) => binding.restrictedTo !== undefined);
  }

  private insert(binding: MiddlewareBinding, scopePath: string): void {
    const wildcard = scopePath.endsWith('/*');
    const base = normalizeTrailingSlash(wildcard ? scopePath.slice(0, -2) : scopePath, true);
    let node = this.root;
    for (const segment of splitPath(base)) {
      if (segment.startsWith(':')) {
        node = node.param ??= newNode();
      } else {
        node.statics ??= new Map();
        const key = decodeSegment(segment);
        let next = node.statics.get(key);
        if (next === undefined) node.statics.set(key, (next = newNode()));
        node = next;
      }
    }
    addTo(wildcard ? (node.below ??= {}) : (node.inclusive ??= {}), binding);
  }

  /** The middleware of `phase` covering `path`, in execution order. */
  select(phase: MiddlewarePhase, path: string): readonly MiddlewareBinding[] {
    if (!this.scoped) return this.global[phase] ?? EMPTY;
    if (path.length > SELECTION_CACHE_PATH_LENGTH) return this.compute(phase, path);
    let byPhase = this.selections.get(path);
    const kept = byPhase?.[phase];
    if (kept !== undefined) return kept;
    if (byPhase === undefined) {
      if (this.selections.size >= SELECTION_CACHE_PATHS) this.selections.clear();
      byPhase = {};
      this.selections.set(path, byPhase);
    }
    const selected = this.compute(phase, path);
    byPhase[phase] = selected;
    return selected;
  }

  private compute(phase: MiddlewarePhase, path: string): readonly MiddlewareBinding[] {
    const global = this.global[phase];
    const found: MiddlewareBinding[] = [];
    const segments = splitPath(normalizeTrailingSlash(path, this.ignoreTrailingSlash));
    this.collect(this.root, segments, 0, phase, found);
    if (found.length === 0) return global ?? EMPTY;
    if (global !== undefined) found.push(...global);
    // Several scope nodes can cover one path (static and param branches): dedupe, then order.
    const unique = found.length > 1 ? [...new Set(found)] : found;
    return unique.sort(compareMiddleware);
  }

  private collect(node: ScopeNode, segments: string[], index: number, phase: MiddlewarePhase, out: MiddlewareBinding[]): void {
    const inclusive = node.inclusive?.[phase];
    if (inclusive !== undefined && index > 0) out.push(...inclusive);
    if (index === segments.length) return;
    const below = node.below?.[phase];
    if (below !== undefined) out.push(...below);
    const segment = decodeSegment(segments[index] as string);
    const child = node.statics?.get(segment);
    if (child !== undefined) this.collect(child, segments, index + 1, phase, out);
    if (node.param !== undefined && segment.length > 0) this.collect(node.param, segments, index + 1, phase, out);
  }
}
