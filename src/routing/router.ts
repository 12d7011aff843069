import type { PathPattern, PatternSegment } from './path-pattern.js';
import { normalizeTrailingSlash, splitPath } from './path-pattern.js';
import { ChurnMap } from './churn-map.js';
import { dataRecord } from '../values.js';

/**
 * A segment trie. Matching walks one map lookup per segment, so its cost depends on the path's depth,
 * not on how many routes exist. Static segments win over parameters; when a static branch dead-ends
 * the matcher backtracks into the parameter branch (`/users/me` and `/users/:id/posts` both work).
 * The table keeps one router and changes it a route at a time (`set`, `delete`: one walk down the
 * route's segments), so a change costs its own routes, not the table's size (docs/scale.md).
 */
export interface RouteTarget {
  method: string;
  pattern: PathPattern;
}

export interface RouteMatch<T extends RouteTarget> {
  route: T;
  params: Record<string, string>;
}

export type MatchResult<T extends RouteTarget> =
  | { kind: 'matched'; match: RouteMatch<T> }
  | { kind: 'not_found' }
  /** The path is bound, but only for other methods: `allow` lists them (405 + Allow, as iii answers). */
  | { kind: 'method_not_allowed'; allow: readonly string[] }
  | { kind: 'invalid_path' };

interface TrieNode<T> {
  /** A ChurnMap: a path segment whose last route goes and comes back again and again costs no more each time. */
  statics: ChurnMap<string, TrieNode<T>> | undefined;
  param: TrieNode<T> | undefined;
  routes: Map<string, T> | undefined;
}

const newNode = <T>(): TrieNode<T> => ({ statics: undefined, param: undefined, routes: undefined });

export class Router<T extends RouteTarget> {
  private readonly root: TrieNode<T> = newNode<T>();
  private count = 0;

  /** `routes` must already be de-duplicated by method and shape (the table picks one binding). */
  constructor(
    routes: Iterable<T>,
    private readonly ignoreTrailingSlash: boolean,
  ) {
    for (const route of routes) this.set(route);
  }

  /** Routes held: one per method and path shape. */
  get size(): number {
    return this.count;
  }

  /** Binds `route` to its method and path shape, replacing the route held there. */
  set(route: T): void {
    let node = this.root;
    for (const segment of route.pattern.segments) {
      if (segment.kind === 'param') {
        node.param ??= newNode<T>();
        node = node.param;
      } else {
        node.statics ??= new ChurnMap();
        let next = node.statics.get(segment.value);
        if (next === undefined) {
          next = newNode<T>();
          node.statics.set(segment.value, next);
        }
        node = next;
      }
    }
    node.routes ??= new Map();
    if (!node.routes.has(route.method)) this.count++;
    node.routes.set(route.method, route);
  }

  /**
   * Unbinds the route of `method` and the shape of `pattern`; nodes left with no route and no child
   * are removed, so routes that come and go do not grow the trie. Returns whether one was bound.
   */
  delete(method: string, pattern: PathPattern): boolean {
    const path: TrieNode<T>[] = [this.root];
    let node = this.root;
    for (const segment of pattern.segments) {
      const next = segment.kind === 'param' ? node.param : node.statics?.get(segment.value);
      if (next === undefined) return false;
      path.push(next);
      node = next;
    }
    if (node.routes?.delete(method) !== true) return false;
    this.count--;
    if (node.routes.size === 0) node.routes = undefined;
    for (let depth = pattern.segments.length; depth > 0; depth--) {
      const emptied = path[depth] as TrieNode<T>;
      if (emptied.routes !== undefined || emptied.param !== undefined || emptied.statics !== undefined) break;
      const parent = path[depth - 1] as TrieNode<T>;
      const segment = pattern.segments[depth - 1] as PatternSegment;
      if (segment.kind === 'param') {
        parent.param = undefined;
      } else {
        parent.statics?.delete(segment.value);
        if (parent.statics?.size === 0) parent.statics = undefined;
      }
    }
    return true;
  }

  /** `path` is the raw request path without the query string. */
  match(method: string, path: string): MatchResult<T> {
    const rawSegments = splitPath(normalizeTrailingSlash(path, this.ignoreTrailingSlash));
    const segments = new Array<string>(rawSegments.length);
    for (let i = 0; i < rawSegments.length; i++) {
      const raw = rawSegments[i] as string;
      if (raw.includes('%')) {
        try {
          segments[i] = decodeURIComponent(raw);
        } catch {
          return { kind: 'invalid_path' };
        }
      } else {
        segments[i] = raw;
      }
    }
    const values: string[] = [];
    let route = this.walk(this.root, segments, 0, method, values);
    if (route === undefined && method === 'HEAD') {
      values.length = 0;
      route = this.walk(this.root, segments, 0, 'GET', values);
    }
    if (route === undefined) return this.missed(segments);
    // Inheriting nothing: a parameter named `__proto__` (a valid name) must stay plain data, not be
    // dropped by the Object.prototype setter; query params are made the same way for the same reason.
    const params = dataRecord();
    const names = route.pattern.paramNames;
    for (let i = 0; i < names.length; i++) params[names[i] as string] = values[i] as string;
    return { kind: 'matched', match: { route, params } };
  }

  /** No route for the method: 405 when some route binds the path for another method, else 404. */
  private missed(segments: string[]): MatchResult<T> {
    const methods = new Set<string>();
    this.methodsAt(this.root, segments, 0, methods);
    if (methods.size === 0) return { kind: 'not_found' };
    // A GET route serves HEAD too (match() falls back to it).
    if (methods.has('GET')) methods.add('HEAD');
    return { kind: 'method_not_allowed', allow: [...methods].sort() };
  }

  /** Every method bound at any node the path reaches (static and parameter branches alike). */
  private methodsAt(node: TrieNode<T>, segments: string[], index: number, out: Set<string>): void {
    if (index === segments.length) {
      if (node.routes !== undefined) for (const method of node.routes.keys()) out.add(method);
      return;
    }
    const segment = segments[index] as string;
    const staticChild = node.statics?.get(segment);
    if (staticChild !== undefined) this.methodsAt(staticChild, segments, index + 1, out);
    if (node.param !== undefined && segment.length > 0) this.methodsAt(node.param, segments, index + 1, out);
  }

  private walk(node: TrieNode<T>, segments: string[], index: number, method: string, values: string[]): T | undefined {
    if (index === segments.length) return node.routes?.get(method);
    const segment = segments[index] as string;
    const staticChild = node.statics?.get(segment);
    if (staticChild !== undefined) {
      const found = this.walk(staticChild, segments, index + 1, method, values);
      if (found !== undefined) return found;
    }
    if (node.param !== undefined && segment.length > 0) {
      values.push(segment);
      const found = this.walk(node.param, segments, index + 1, method, values);
      if (found !== undefined) return found;
      values.pop();
    }
    return undefined;
  }
}
