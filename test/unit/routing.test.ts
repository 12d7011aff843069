import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import type { PathPattern } from '../../src/routing/path-pattern.js';
import { normalizeTrailingSlash, parsePathPattern, splitPath } from '../../src/routing/path-pattern.js';
import type { FunctionRecord, OwnerSnapshot, TriggerRecord } from '../../src/routing/registrations.js';
import { compareRegistration } from '../../src/routing/registrations.js';
import type { RoutingState } from '../../src/routing/route-table.js';
import { RouteTable } from '../../src/routing/route-table.js';
import type { MatchResult, RouteTarget } from '../../src/routing/router.js';
import { Router } from '../../src/routing/router.js';
import { validateTrigger } from '../../src/routing/trigger-config.js';
import { referenceBuild } from '../support/route-table-reference.js';
import type { Touched } from '../../src/routing/owner-index.js';
import { OwnerIndex, nothingTouched } from '../../src/routing/owner-index.js';

function pattern(source: string, ignoreTrailingSlash = false): PathPattern {
  const parsed = parsePathPattern(source, ignoreTrailingSlash);
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.pattern;
}

interface TestRoute extends RouteTarget {
  id: string;
}

function route(method: string, source: string, ignoreTrailingSlash = false): TestRoute {
  return { id: `${method} ${source}`, method, pattern: pattern(source, ignoreTrailingSlash) };
}

function router(specs: [string, string][], ignoreTrailingSlash = false): Router<TestRoute> {
  return new Router(
    specs.map(([method, source]) => route(method, source, ignoreTrailingSlash)),
    ignoreTrailingSlash,
  );
}

/** `matched` → `[route id, params]`; otherwise the kind. */
function outcome(result: MatchResult<TestRoute>): [string, Record<string, string>] | string {
  return result.kind === 'matched' ? [result.match.route.id, { ...result.match.params }] : result.kind;
}

const nextTick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('splitPath and normalizeTrailingSlash', () => {
  it('splits after the leading slash', () => {
    expect(splitPath('/')).toEqual(['']);
    expect(splitPath('/a/b')).toEqual(['a', 'b']);
    expect(splitPath('/a/')).toEqual(['a', '']);
    expect(splitPath('/a//b')).toEqual(['a', '', 'b']);
  });

  it('drops trailing slashes only when asked, never the root', () => {
    expect(normalizeTrailingSlash('/a/', false)).toBe('/a/');
    expect(normalizeTrailingSlash('/a/', true)).toBe('/a');
    expect(normalizeTrailingSlash('/a///', true)).toBe('/a');
    expect(normalizeTrailingSlash('/', true)).toBe('/');
    expect(normalizeTrailingSlash('//', true)).toBe('/');
    expect(normalizeTrailingSlash('/a', true)).toBe('/a');
  });
});

describe('parsePathPattern', () => {
  it('parses static and parameter segments', () => {
    expect(parsePathPattern('/users/:id/posts', false)).toStrictEqual({
      ok: true,
      pattern: {
        source: '/users/:id/posts',
        segments: [
          { kind: 'static', value: 'users' },
          { kind: 'param', name: 'id' },
          { kind: 'static', value: 'posts' },
        ],
        paramNames: ['id'],
        shapeKey: '/users/:/posts',
      },
    });
  });

  it('parses the root as one empty static segment', () => {
    expect(pattern('/')).toStrictEqual({
      source: '/',
      segments: [{ kind: 'static', value: '' }],
      paramNames: [],
      shapeKey: '/',
    });
  });

  it('accepts parameter names made of letters, digits and underscores, not starting with a digit', () => {
    expect(pattern('/:a/:_b/:C9/:snake_case').paramNames).toEqual(['a', '_b', 'C9', 'snake_case']);
  });

  it('percent-decodes static segments', () => {
    expect(pattern('/a%20b/%C3%A9').segments).toEqual([
      { kind: 'static', value: 'a b' },
      { kind: 'static', value: 'é' },
    ]);
  });

  it('gives two patterns of one shape the same key regardless of parameter names', () => {
    expect(pattern('/a/:x/c').shapeKey).toBe(pattern('/a/:y/c').shapeKey);
    expect(pattern('/a/:x/c').shapeKey).not.toBe(pattern('/a/:x/d').shapeKey);
    expect(pattern('/%61').shapeKey).toBe(pattern('/a').shapeKey);
  });

  it('keeps a literal ":" (from %3A) apart from a parameter', () => {
    expect(pattern('/%3A').segments).toEqual([{ kind: 'static', value: ':' }]);
    expect(pattern('/%3A').shapeKey).not.toBe(pattern('/:x').shapeKey);
  });

  it('keeps an encoded slash (one segment) apart from a real one (two segments)', () => {
    expect(pattern('/a%2Fb').segments).toEqual([{ kind: 'static', value: 'a/b' }]);
    expect(pattern('/a%2Fb').shapeKey).not.toBe(pattern('/a/b').shapeKey);
    expect(pattern('/a%2F:x').shapeKey).not.toBe(pattern('/a/:x').shapeKey);
  });

  it('keeps a trailing slash distinct unless ignoreTrailingSlash', () => {
    expect(pattern('/a/').segments).toEqual([
      { kind: 'static', value: 'a' },
      { kind: 'static', value: '' },
    ]);
    expect(pattern('/a/').shapeKey).not.toBe(pattern('/a').shapeKey);
    const ignored = pattern('/a/', true);
    expect(ignored.source).toBe('/a/');
    expect(ignored.segments).toEqual([{ kind: 'static', value: 'a' }]);
    expect(ignored.shapeKey).toBe(pattern('/a', true).shapeKey);
  });

  it('rejects invalid patterns with a message', () => {
    const cases: [string, string][] = [
      ['users', 'api_path must be a string starting with "/"'],
      ['', 'api_path must be a string starting with "/"'],
      ['/a?b=1', 'api_path must not contain "?" or "#"'],
      ['/a#frag', 'api_path must not contain "?" or "#"'],
      ['/a b', 'api_path must not contain whitespace'],
      ['/a\tb', 'api_path must not contain whitespace'],
      ['/a\nb', 'api_path must not contain whitespace'],
      ['/:', 'invalid parameter segment ":" in api_path'],
      ['/:1a', 'invalid parameter segment ":1a" in api_path'],
      ['/:a-b', 'invalid parameter segment ":a-b" in api_path'],
      ['/::a', 'invalid parameter segment "::a" in api_path'],
      ['/:a/x/:a', 'duplicate parameter "a" in api_path'],
      ['/%zz', 'invalid percent-encoding in api_path segment "%zz"'],
      ['/100%', 'invalid percent-encoding in api_path segment "100%"'],
    ];
    for (const [source, message] of cases) {
      expect(parsePathPattern(source, false), source).toStrictEqual({ ok: false, message });
    }
    expect(parsePathPattern(42 as unknown as string, false)).toStrictEqual({
      ok: false,
      message: 'api_path must be a string starting with "/"',
    });
  });
});

describe('Router', () => {
  it('matches static routes and reports size', () => {
    const r = router([
      ['GET', '/'],
      ['GET', '/health'],
      ['POST', '/health'],
    ]);
    expect(r.size).toBe(3);
    expect(outcome(r.match('GET', '/'))).toEqual(['GET /', {}]);
    expect(outcome(r.match('GET', '/health'))).toEqual(['GET /health', {}]);
    expect(outcome(r.match('POST', '/health'))).toEqual(['POST /health', {}]);
    expect(outcome(r.match('GET', '/nope'))).toBe('not_found');
  });

  it('prefers a static segment over a parameter', () => {
    const r = router([
      ['GET', '/users/:id'],
      ['GET', '/users/me'],
    ]);
    expect(outcome(r.match('GET', '/users/me'))).toEqual(['GET /users/me', {}]);
    expect(outcome(r.match('GET', '/users/42'))).toEqual(['GET /users/:id', { id: '42' }]);
  });

  it('backtracks into the parameter branch when the static branch dead-ends', () => {
    const r = router([
      ['GET', '/users/me'],
      ['GET', '/users/:id/posts'],
      ['GET', '/a/b/c'],
      ['GET', '/a/:x/d'],
      ['GET', '/:p/b/e'],
    ]);
    expect(outcome(r.match('GET', '/users/me/posts'))).toEqual(['GET /users/:id/posts', { id: 'me' }]);
    expect(outcome(r.match('GET', '/a/b/c'))).toEqual(['GET /a/b/c', {}]);
    expect(outcome(r.match('GET', '/a/b/d'))).toEqual(['GET /a/:x/d', { x: 'b' }]);
    expect(outcome(r.match('GET', '/a/b/e'))).toEqual(['GET /:p/b/e', { p: 'a' }]);
    expect(outcome(r.match('GET', '/a/b/f'))).toBe('not_found');
  });

  it('backtracks when the static branch has the path but not the method', () => {
    const r = router([
      ['POST', '/users/me'],
      ['GET', '/users/:id'],
    ]);
    expect(outcome(r.match('GET', '/users/me'))).toEqual(['GET /users/:id', { id: 'me' }]);
    expect(outcome(r.match('POST', '/users/me'))).toEqual(['POST /users/me', {}]);
    expect(outcome(r.match('POST', '/users/42'))).toBe('method_not_allowed');
  });

  it('does not leak values from an abandoned branch into params', () => {
    const r = router([
      ['GET', '/:a/:b/x'],
      ['GET', '/:c/y/z'],
    ]);
    expect(outcome(r.match('GET', '/1/y/z'))).toEqual(['GET /:c/y/z', { c: '1' }]);
    expect(outcome(r.match('GET', '/1/2/x'))).toEqual(['GET /:a/:b/x', { a: '1', b: '2' }]);
  });

  it('percent-decodes params and static segments', () => {
    const r = router([
      ['GET', '/users/:id'],
      ['GET', '/files/a b'.replace(' ', '%20')],
    ]);
    expect(outcome(r.match('GET', '/users/a%20b'))).toEqual(['GET /users/:id', { id: 'a b' }]);
    expect(outcome(r.match('GET', '/users/a%2Fb'))).toEqual(['GET /users/:id', { id: 'a/b' }]);
    expect(outcome(r.match('GET', '/users/%C3%A9t%C3%A9'))).toEqual(['GET /users/:id', { id: 'été' }]);
    expect(outcome(r.match('GET', '/%75sers/7'))).toEqual(['GET /users/:id', { id: '7' }]);
    expect(outcome(r.match('GET', '/files/a%20b'))).toEqual(['GET /files/a%20b', {}]);
  });

  it('matches an encoded-slash static segment only against an encoded slash', () => {
    const r = router([['GET', '/a%2Fb']]);
    expect(outcome(r.match('GET', '/a%2Fb'))).toEqual(['GET /a%2Fb', {}]);
    expect(outcome(r.match('GET', '/a/b'))).toBe('not_found');
  });

  it('reports invalid percent-encoding as invalid_path', () => {
    const r = router([['GET', '/users/:id']]);
    expect(r.match('GET', '/users/%zz')).toStrictEqual({ kind: 'invalid_path' });
    expect(r.match('GET', '/users/%E0%A4%A')).toStrictEqual({ kind: 'invalid_path' });
    expect(r.match('GET', '/users/%')).toStrictEqual({ kind: 'invalid_path' });
    expect(r.match('GET', '/other/%FF')).toStrictEqual({ kind: 'invalid_path' });
  });

  it('keeps a parameter named __proto__ as plain data', () => {
    const r = router([['GET', '/x/:__proto__']]);
    const result = r.match('GET', '/x/value');
    expect(result.kind).toBe('matched');
    if (result.kind !== 'matched') return;
    expect(Object.keys(result.match.params)).toEqual(['__proto__']);
    expect(Object.getOwnPropertyDescriptor(result.match.params, '__proto__')?.value).toBe('value');
    expect(JSON.stringify(result.match.params)).toBe('{"__proto__":"value"}');
  });

  it('keeps trailing slashes distinct by default', () => {
    const r = router([
      ['GET', '/a'],
      ['GET', '/b/'],
    ]);
    expect(outcome(r.match('GET', '/a'))).toEqual(['GET /a', {}]);
    expect(outcome(r.match('GET', '/a/'))).toBe('not_found');
    expect(outcome(r.match('GET', '/b/'))).toEqual(['GET /b/', {}]);
    expect(outcome(r.match('GET', '/b'))).toBe('not_found');
  });

  it('treats a trailing slash as the same route with ignoreTrailingSlash', () => {
    const r = router(
      [
        ['GET', '/a'],
        ['GET', '/b/'],
        ['GET', '/c/:id'],
        ['GET', '/'],
      ],
      true,
    );
    expect(outcome(r.match('GET', '/a'))).toEqual(['GET /a', {}]);
    expect(outcome(r.match('GET', '/a/'))).toEqual(['GET /a', {}]);
    expect(outcome(r.match('GET', '/a//'))).toEqual(['GET /a', {}]);
    expect(outcome(r.match('GET', '/b'))).toEqual(['GET /b/', {}]);
    expect(outcome(r.match('GET', '/b/'))).toEqual(['GET /b/', {}]);
    expect(outcome(r.match('GET', '/c/1/'))).toEqual(['GET /c/:id', { id: '1' }]);
    expect(outcome(r.match('GET', '/'))).toEqual(['GET /', {}]);
  });

  it('falls back from HEAD to GET, prefers an explicit HEAD route, and does not fall back for other methods', () => {
    const r = router([
      ['GET', '/a'],
      ['GET', '/b'],
      ['HEAD', '/b'],
      ['POST', '/c'],
    ]);
    expect(outcome(r.match('HEAD', '/a'))).toEqual(['GET /a', {}]);
    expect(outcome(r.match('HEAD', '/b'))).toEqual(['HEAD /b', {}]);
    expect(outcome(r.match('HEAD', '/c'))).toBe('method_not_allowed');
    expect(outcome(r.match('OPTIONS', '/a'))).toBe('method_not_allowed');
    expect(outcome(r.match('POST', '/a'))).toBe('method_not_allowed');
  });

  it('HEAD fallback starts from fresh params', () => {
    const r = router([
      ['HEAD', '/:a/x'],
      ['GET', '/:b/y'],
    ]);
    expect(outcome(r.match('HEAD', '/1/y'))).toEqual(['GET /:b/y', { b: '1' }]);
  });

  it('answers method_not_allowed with the bound methods for a path bound for other methods only', () => {
    const r = router([['POST', '/items'], ['GET', '/items/:id'], ['DELETE', '/items/me']]);
    expect(r.match('GET', '/items')).toStrictEqual({ kind: 'method_not_allowed', allow: ['POST'] });
    expect(r.match('post', '/items')).toStrictEqual({ kind: 'method_not_allowed', allow: ['POST'] });
    // Static and parameter branches both bind /items/me; GET also serves HEAD.
    expect(r.match('PUT', '/items/me')).toStrictEqual({ kind: 'method_not_allowed', allow: ['DELETE', 'GET', 'HEAD'] });
    expect(r.match('GET', '/other')).toStrictEqual({ kind: 'not_found' });
  });

  it('never matches an empty segment with a parameter', () => {
    const r = router([
      ['GET', '/users/:id'],
      ['GET', '/a/:x/b'],
      ['GET', '/:only'],
    ]);
    expect(outcome(r.match('GET', '/users/'))).toBe('not_found');
    expect(outcome(r.match('GET', '/a//b'))).toBe('not_found');
    expect(outcome(r.match('GET', '/'))).toBe('not_found');
    expect(outcome(r.match('GET', '/users//'))).toBe('not_found');
  });

  it('an empty router matches nothing', () => {
    const r = new Router<TestRoute>([], false);
    expect(r.size).toBe(0);
    expect(r.match('GET', '/')).toStrictEqual({ kind: 'not_found' });
  });

  describe('property: agrees with a brute-force reference matcher', () => {
    const STATICS = ['a', 'b', 'c', 'x%20y'] as const;
    const PATH_SEGMENTS = ['a', 'b', 'c', 'd', '', 'x%20y', 'x y', 'b%61'] as const;
    const METHODS = ['GET', 'POST', 'HEAD'] as const;

    type Kind = { static: string } | 'param';
    const routeSpec = fc.record({
      method: fc.constantFrom(...METHODS),
      kinds: fc.array(fc.oneof(fc.constantFrom(...STATICS).map((s): Kind => ({ static: s })), fc.constant<Kind>('param')), {
        maxLength: 4,
      }),
    });

    const sourceOf = (kinds: readonly Kind[]): string =>
      '/' + kinds.map((k, i) => (k === 'param' ? `:p${i}` : k.static)).join('/');

    /** Brute force: every same-method route whose segments match; static-before-param order decides. */
    function reference(
      routes: { method: string; kinds: readonly Kind[] }[],
      method: string,
      path: string,
      ignoreTrailingSlash: boolean,
    ): [string, Record<string, string>] | 'not_found' | 'method_not_allowed' {
      const normalized = ignoreTrailingSlash ? path.replace(/\/+$/, '') || '/' : path;
      const segments = normalized.slice(1).split('/').map((s) => decodeURIComponent(s));
      const attempt = (m: string): [string, Record<string, string>] | undefined => {
        const candidates = routes
          .filter((r) => r.method === m)
          .map((r) => {
            const patternSegs = r.kinds.length === 0 ? [{ static: '' }] : r.kinds;
            return { r, patternSegs };
          })
          .filter(
            ({ patternSegs }) =>
              patternSegs.length === segments.length &&
              patternSegs.every((k, i) =>
                k === 'param' ? (segments[i] ?? '').length > 0 : decodeURIComponent(k.static) === segments[i],
              ),
          )
          .map(({ r, patternSegs }) => ({ r, rank: patternSegs.map((k) => (k === 'param' ? '1' : '0')).join('') }))
          .sort((x, y) => (x.rank < y.rank ? -1 : x.rank > y.rank ? 1 : 0));
        const best = candidates[0];
        if (best === undefined) return undefined;
        const params: Record<string, string> = {};
        best.r.kinds.forEach((k, i) => {
          if (k === 'param') params[`p${i}`] = segments[i] as string;
        });
        return [`${best.r.method} ${sourceOf(best.r.kinds)}`, params];
      };
      const found = attempt(method) ?? (method === 'HEAD' ? attempt('GET') : undefined);
      if (found !== undefined) return found;
      // Bound for another method only: 405.
      return METHODS.some((m) => attempt(m) !== undefined) ? 'method_not_allowed' : 'not_found';
    }

    for (const ignoreTrailingSlash of [false, true]) {
      it(`ignoreTrailingSlash=${String(ignoreTrailingSlash)}`, () => {
        const routeSet = fc.uniqueArray(routeSpec, {
          maxLength: 25,
          // The table hands the router one binding per method and shape.
          selector: (r) => `${r.method} ${r.kinds.map((k) => (k === 'param' ? ':' : decodeURIComponent(k.static))).join('/')}`,
        });
        const request = fc.record({
          method: fc.constantFrom(...METHODS),
          segments: fc.array(fc.constantFrom(...PATH_SEGMENTS), { maxLength: 5 }),
        });
        fc.assert(
          fc.property(routeSet, fc.array(request, { minLength: 1, maxLength: 20 }), (routes, requests) => {
            const r = router(
              routes.map((spec) => [spec.method, sourceOf(spec.kinds)]),
              ignoreTrailingSlash,
            );
            for (const { method, segments } of requests) {
              const path = '/' + segments.join('/');
              expect(outcome(r.match(method, path)), `${method} ${path}`).toEqual(
                reference(routes, method, path, ignoreTrailingSlash),
              );
            }
          }),
          { numRuns: 400 },
        );
      });
    }
  });
});

// ---- RouteTable ----------------------------------------------------------------------------------

function httpTrigger(
  id: string,
  functionId: string,
  method: string,
  apiPath: string,
  registeredAt: number,
  options: { seq?: number; config?: Record<string, unknown>; ignoreTrailingSlash?: boolean } = {},
): TriggerRecord {
  const validated = validateTrigger(
    'http',
    { api_path: apiPath, http_method: method, ...options.config },
    options.ignoreTrailingSlash ?? false,
  );
  if (!validated.ok) throw new Error(validated.message);
  return { ...validated.spec, id, functionId, workerId: 'w', registeredAt, seq: options.seq ?? 0 };
}

function middlewareTrigger(
  id: string,
  functionId: string,
  config: Record<string, unknown>,
  registeredAt: number,
  seq = 0,
): TriggerRecord {
  const validated = validateTrigger('http_middleware', config, false);
  if (!validated.ok) throw new Error(validated.message);
  return { ...validated.spec, id, functionId, workerId: 'w', registeredAt, seq };
}

function snapshot(
  ownerId: string,
  version: number,
  functions: string[],
  triggers: TriggerRecord[],
): OwnerSnapshot {
  const records: FunctionRecord[] = functions.map((id) => ({ id, workerId: 'w' }));
  return { ownerId, version, functions: records, triggers };
}

/** Route served for `method path`: `functionId` or the match kind. */
function served(state: RoutingState, method: string, path: string): string {
  const result = state.router.match(method, path);
  return result.kind === 'matched' ? result.match.route.functionId : result.kind;
}

describe('compareRegistration', () => {
  it('orders by registeredAt, then ownerId, then seq', () => {
    expect(compareRegistration({ registeredAt: 1, seq: 9, ownerId: 'z' }, { registeredAt: 2, seq: 0, ownerId: 'a' })).toBeLessThan(0);
    expect(compareRegistration({ registeredAt: 2, seq: 0, ownerId: 'a' }, { registeredAt: 2, seq: 0, ownerId: 'b' })).toBe(-1);
    expect(compareRegistration({ registeredAt: 2, seq: 0, ownerId: 'b' }, { registeredAt: 2, seq: 0, ownerId: 'a' })).toBe(1);
    expect(compareRegistration({ registeredAt: 2, seq: 3, ownerId: 'a' }, { registeredAt: 2, seq: 1, ownerId: 'a' })).toBeGreaterThan(0);
    expect(compareRegistration({ registeredAt: 2, seq: 1, ownerId: 'a' }, { registeredAt: 2, seq: 1, ownerId: 'a' })).toBe(0);
  });
});

describe('RouteTable', () => {
  it('starts empty', () => {
    const state = new RouteTable(false).current();
    expect(state.router.size).toBe(0);
    expect(state.middleware.ordered).toEqual([]);
    expect(state.functionOwners.size).toBe(0);
  });

  it('builds routes with their binding details; optional details are absent when unset', () => {
    const table = new RouteTable(false);
    table.applySnapshot(
      snapshot('p1', 1, ['api::get', 'api::post'], [
        httpTrigger('t1', 'api::get', 'get', '/users/:id', 1),
        httpTrigger('t2', 'api::post', 'POST', '/users', 2, {
          config: { condition_function_id: 'api::allowed', middleware_function_ids: ['mw::a', 'mw::b'] },
        }),
      ]),
    );
    const state = table.current();
    expect(state.router.size).toBe(2);
    const get = state.router.match('GET', '/users/42');
    expect(get.kind).toBe('matched');
    if (get.kind !== 'matched') return;
    expect(get.match.params).toEqual({ id: '42' });
    const { pattern: getPattern, ...getRoute } = get.match.route;
    expect(getRoute).toStrictEqual({ method: 'GET', apiPath: '/users/:id', triggerId: 't1', functionId: 'api::get', ownerId: 'p1', principal: 'listener-0', workerId: 'w' });
    expect(getPattern.source).toBe('/users/:id');

    const post = state.router.match('POST', '/users');
    if (post.kind !== 'matched') throw new Error('expected a match');
    const { pattern: _p, ...postRoute } = post.match.route;
    expect(postRoute).toStrictEqual({
      method: 'POST',
      apiPath: '/users',
      triggerId: 't2',
      functionId: 'api::post',
      ownerId: 'p1',
      principal: 'listener-0',
      workerId: 'w',
      conditionFunctionId: 'api::allowed',
      middlewareFunctionIds: ['mw::a', 'mw::b'],
    });
  });

  it('records which owners serve each function', () => {
    const table = new RouteTable(false);
    table.applySnapshot(snapshot('p1', 1, ['f', 'g', 'f'], []));
    table.applySnapshot(snapshot('p2', 1, ['f'], []));
    const owners = table.current().functionOwners;
    expect(owners.get('f')).toEqual(['p1', 'p2']);
    expect(owners.get('g')).toEqual(['p1']);
    expect(owners.has('h')).toBe(false);
  });

  it('applies only newer snapshot versions per owner', () => {
    const table = new RouteTable(false);
    expect(table.applySnapshot(snapshot('p1', 2, ['f2'], [httpTrigger('t', 'f2', 'GET', '/v', 1)]))).toBe(true);
    expect(table.applySnapshot(snapshot('p1', 1, ['f1'], [httpTrigger('t', 'f1', 'GET', '/v', 1)]))).toBe(false);
    expect(table.applySnapshot(snapshot('p1', 2, ['f1'], [httpTrigger('t', 'f1', 'GET', '/v', 1)]))).toBe(false);
    expect(served(table.current(), 'GET', '/v')).toBe('f2');
    expect(table.applySnapshot(snapshot('p1', 3, ['f3'], [httpTrigger('t', 'f3', 'GET', '/v', 1)]))).toBe(true);
    expect(served(table.current(), 'GET', '/v')).toBe('f3');
    // Versions are per owner: another owner's version 1 is new.
    expect(table.applySnapshot(snapshot('p2', 1, [], []))).toBe(true);
  });

  it('removeOwner drops an owner and reports whether it was held', () => {
    const table = new RouteTable(false);
    table.applySnapshot(snapshot('p1', 1, ['f'], [httpTrigger('t', 'f', 'GET', '/a', 1)]));
    expect(served(table.current(), 'GET', '/a')).toBe('f');
    expect(table.removeOwner('p1')).toBe(true);
    expect(table.removeOwner('p1')).toBe(false);
    expect(table.removeOwner('never')).toBe(false);
    const state = table.current();
    expect(served(state, 'GET', '/a')).toBe('not_found');
    expect(state.functionOwners.has('f')).toBe(false);
    // After removal, any version from that owner is accepted again.
    expect(table.applySnapshot(snapshot('p1', 1, [], []))).toBe(true);
  });

  it('the oldest binding of one method and path holds it, whichever owner arrives first; the newer one is a conflict', () => {
    for (const order of [
      ['p1', 'p2'],
      ['p2', 'p1'],
    ] as const) {
      const table = new RouteTable(false);
      const snaps = {
        p1: snapshot('p1', 1, ['old'], [httpTrigger('t1', 'old', 'GET', '/a', 100)]),
        p2: snapshot('p2', 1, ['new'], [httpTrigger('t2', 'new', 'GET', '/a', 200)]),
      };
      for (const owner of order) table.applySnapshot(snaps[owner]);
      const state = table.current();
      expect(served(state, 'GET', '/a')).toBe('old');
      expect(state.router.size).toBe(1);
      expect(state.conflicts.map(({ kind, ownerId, id, holderOwnerId }) => ({ kind, ownerId, id, holderOwnerId }))).toEqual([
        { kind: 'route', ownerId: 'p2', id: 't2', holderOwnerId: 'p1' },
      ]);
      expect(state.conflicts[0]?.reason).toMatch(/route GET \/a conflicts with GET \/a, registered earlier for function old/);
    }
  });

  it('breaks registeredAt ties by owner id, then seq: the first in that order holds', () => {
    const table = new RouteTable(false);
    table.applySnapshot(snapshot('b', 1, ['fb'], [httpTrigger('t1', 'fb', 'GET', '/a', 100)]));
    table.applySnapshot(snapshot('a', 1, ['fa'], [httpTrigger('t2', 'fa', 'GET', '/a', 100, { seq: 99 })]));
    expect(served(table.current(), 'GET', '/a')).toBe('fa');

    const single = new RouteTable(false);
    single.applySnapshot(
      snapshot('p', 1, ['f1', 'f2'], [
        httpTrigger('t2', 'f2', 'GET', '/a', 100, { seq: 2 }),
        httpTrigger('t1', 'f1', 'GET', '/a', 100, { seq: 1 }),
      ]),
    );
    expect(served(single.current(), 'GET', '/a')).toBe('f1');
    // Both sides on one owner: it decides alone, at once (conflict-refusals.ts).
    expect(single.current().conflicts.map((c) => [c.id, c.ownerId, c.holderOwnerId])).toEqual([['t2', 'p', 'p']]);
  });

  it('replicas (same function, path and principal) share the route; the newest live one serves', () => {
    const table = new RouteTable(false);
    table.applySnapshot(snapshot('p1', 1, ['f'], [httpTrigger('t1', 'f', 'GET', '/a', 1)]));
    table.applySnapshot(snapshot('p2', 1, ['f'], [httpTrigger('t2', 'f', 'GET', '/a', 2)]));
    const state = table.current();
    expect(state.conflicts).toEqual([]);
    const match = state.router.match('GET', '/a');
    if (match.kind !== 'matched') throw new Error('expected a match');
    expect(match.match.route.triggerId).toBe('t2');
  });

  it('another principal cannot join a route, even with the same function', () => {
    const table = new RouteTable(false);
    table.applySnapshot(snapshot('p1', 1, ['f'], [httpTrigger('t1', 'f', 'GET', '/a', 1)]));
    table.applySnapshot(snapshot('p2', 1, [], [{ ...httpTrigger('t2', 'f', 'GET', '/a', 2), principal: 'rbac-listener-1' }]));
    const state = table.current();
    expect(served(state, 'GET', '/a')).toBe('f');
    expect(state.conflicts.map((c) => [c.ownerId, c.id])).toEqual([['p2', 't2']]);
    expect(state.conflicts[0]?.reason).toMatch(/by another principal/);
  });

  it('treats /a/:x and /a/:y as one shape: the older holds and names the params, the newer is refused (as iii)', () => {
    const table = new RouteTable(false);
    table.applySnapshot(
      snapshot('p', 1, ['fx', 'fy'], [
        httpTrigger('t1', 'fx', 'GET', '/a/:x', 1),
        httpTrigger('t2', 'fy', 'GET', '/a/:y', 2),
      ]),
    );
    const state = table.current();
    expect(state.router.size).toBe(1);
    const result = state.router.match('GET', '/a/1');
    if (result.kind !== 'matched') throw new Error('expected a match');
    expect(result.match.route.functionId).toBe('fx');
    expect(result.match.params).toEqual({ x: '1' });
    expect(result.match.route.pattern.source).toBe('/a/:x');
    expect(state.conflicts.map((c) => c.id)).toEqual(['t2']);
  });

  it('keeps different methods on one path, and different shapes, as separate routes', () => {
    const table = new RouteTable(false);
    table.applySnapshot(
      snapshot('p', 1, ['get', 'post', 'static'], [
        httpTrigger('t1', 'get', 'GET', '/a/:x', 1),
        httpTrigger('t2', 'post', 'POST', '/a/:x', 2),
        httpTrigger('t3', 'static', 'GET', '/a/b', 3),
      ]),
    );
    const state = table.current();
    expect(state.router.size).toBe(3);
    expect(served(state, 'GET', '/a/1')).toBe('get');
    expect(served(state, 'POST', '/a/1')).toBe('post');
    expect(served(state, 'GET', '/a/b')).toBe('static');
  });

  it('keeps /a%2Fb and /a/b as separate routes', () => {
    const table = new RouteTable(false);
    table.applySnapshot(
      snapshot('p', 1, ['enc', 'plain'], [
        httpTrigger('t1', 'enc', 'GET', '/a%2Fb', 1),
        httpTrigger('t2', 'plain', 'GET', '/a/b', 2),
      ]),
    );
    const state = table.current();
    expect(state.router.size).toBe(2);
    expect(served(state, 'GET', '/a%2Fb')).toBe('enc');
    expect(served(state, 'GET', '/a/b')).toBe('plain');
  });

  it('a binding whose function nobody serves still holds the route; alone it is the route', () => {
    const table = new RouteTable(false);
    table.applySnapshot(snapshot('p1', 1, ['live'], [httpTrigger('t1', 'live', 'GET', '/a', 1)]));
    table.applySnapshot(snapshot('p2', 1, [], [httpTrigger('t2', 'dead', 'GET', '/a', 2)]));
    expect(served(table.current(), 'GET', '/a')).toBe('live');
    expect(table.current().conflicts.map((c) => c.id)).toEqual(['t2']);

    table.removeOwner('p1');
    expect(served(table.current(), 'GET', '/a')).toBe('dead');
    expect(table.current().conflicts).toEqual([]);
  });

  it("a departed worker's binding holds the route for its principal through the grace", () => {
    const table = new RouteTable(false);
    const departedTrigger = httpTrigger('t1', 'f', 'GET', '/a', 1);
    const gone = { workerId: 'w-old', since: 0, functionIds: ['f'], triggers: [departedTrigger] };
    // Another principal registers the route meanwhile: refused.
    table.applySnapshot({ ...snapshot('p1', 1, [], []), departed: [gone] });
    table.applySnapshot(snapshot('p2', 1, ['g'], [{ ...httpTrigger('t2', 'g', 'GET', '/a', 5), principal: 'rbac-listener-1:x' }]));
    expect(served(table.current(), 'GET', '/a')).toBe('f');
    expect(table.current().conflicts.map((c) => c.id)).toEqual(['t2']);
    // The same principal reconnects with a renamed function: it takes the route over.
    table.applySnapshot(snapshot('p2', 2, ['g'], [httpTrigger('t3', 'g', 'GET', '/a', 6)]));
    expect(served(table.current(), 'GET', '/a')).toBe('g');
    expect(table.current().conflicts).toEqual([]);
  });

  it('a function id is held by the principal that registered it first; another principal is a conflict', () => {
    const table = new RouteTable(false);
    table.applySnapshot({ ownerId: 'p1', version: 1, functions: [{ id: 'f', workerId: 'w1', registeredAt: 1 }], triggers: [] });
    table.applySnapshot({ ownerId: 'p2', version: 1, functions: [{ id: 'f', workerId: 'w2', registeredAt: 2, principal: 'rbac-listener-1' }], triggers: [] });
    const state = table.current();
    expect(state.functionOwners.get('f')).toEqual(['p1']);
    expect(state.conflicts.map(({ kind, ownerId, workerId, id }) => ({ kind, ownerId, workerId, id }))).toEqual([
      { kind: 'function', ownerId: 'p2', workerId: 'w2', id: 'f' },
    ]);
  });

  it('sorts middleware by priority, then registration order; ties keep registration order', () => {
    const table = new RouteTable(false);
    table.applySnapshot(
      snapshot('p2', 1, ['m'], [
        middlewareTrigger('late-0', 'm', { phase: 'preHandler' }, 30),
        middlewareTrigger('early-10', 'm', { phase: 'preHandler', priority: 10 }, 5),
      ]),
    );
    table.applySnapshot(
      snapshot('p1', 1, ['m'], [
        middlewareTrigger('mid-0-seq2', 'm', { phase: 'onRequest' }, 20, 2),
        middlewareTrigger('mid-0-seq1', 'm', { phase: 'onRequest' }, 20, 1),
        middlewareTrigger('neg', 'm', { phase: 'onRequest', priority: -5 }, 40),
        middlewareTrigger('late-10', 'm', { phase: 'preHandler', priority: 10 }, 50),
        middlewareTrigger('first-0', 'm', { phase: 'onError' }, 10),
      ]),
    );
    const ids = table.current().middleware.ordered.map((m) => m.triggerId);
    expect(ids).toEqual(['neg', 'first-0', 'mid-0-seq1', 'mid-0-seq2', 'late-0', 'early-10', 'late-10']);
  });

  it('builds middleware bindings with scope only when set', () => {
    const table = new RouteTable(false);
    table.applySnapshot(
      snapshot('p', 1, ['m'], [
        middlewareTrigger('t1', 'mw::auth', { phase: 'preHandler', scope: { path: '/api/*' }, priority: 10 }, 1, 4),
        middlewareTrigger('t2', 'mw::log', { phase: 'onResponse' }, 2),
        httpTrigger('t3', 'm', 'GET', '/a', 3),
      ]),
    );
    const state = table.current();
    expect(state.router.size).toBe(1);
    expect(state.middleware.ordered).toStrictEqual([
      {
        triggerId: 't2',
        functionId: 'mw::log',
        ownerId: 'p',
        phase: 'onResponse',
        priority: 0,
        registeredAt: 2,
        seq: 0,
      },
      {
        triggerId: 't1',
        functionId: 'mw::auth',
        ownerId: 'p',
        phase: 'preHandler',
        scopePath: '/api/*',
        priority: 10,
        registeredAt: 1,
        seq: 4,
      },
    ]);
  });

  it('pulls the local source on rebuild and merges it with remote owners', () => {
    const table = new RouteTable(false);
    let local = snapshot('local', 1, ['lf'], [httpTrigger('t1', 'lf', 'GET', '/local', 1)]);
    const source = { ownerId: 'local', snapshot: vi.fn(() => local) };
    table.setLocalSource(source);
    table.applySnapshot(snapshot('remote', 1, ['rf'], [httpTrigger('t2', 'rf', 'GET', '/remote', 1)]));
    const state = table.current();
    expect(served(state, 'GET', '/local')).toBe('lf');
    expect(served(state, 'GET', '/remote')).toBe('rf');
    expect(state.functionOwners.get('lf')).toEqual(['local']);

    // A change is seen only after markChanged.
    local = snapshot('local', 2, ['lf2'], [httpTrigger('t1', 'lf2', 'GET', '/local', 1)]);
    expect(served(table.current(), 'GET', '/local')).toBe('lf');
    const callsBefore = source.snapshot.mock.calls.length;
    table.markChanged();
    table.markChanged();
    table.markChanged();
    expect(source.snapshot.mock.calls.length).toBe(callsBefore);
    expect(served(table.current(), 'GET', '/local')).toBe('lf2');
    expect(served(table.current(), 'GET', '/local')).toBe('lf2');
    expect(source.snapshot.mock.calls.length).toBe(callsBefore + 1);
  });

  it('returns the same state object while nothing changes', () => {
    const table = new RouteTable(false);
    const first = table.current();
    expect(table.current()).toBe(first);
    table.markChanged();
    const second = table.current();
    expect(second).not.toBe(first);
    expect(second.version).toBeGreaterThan(first.version);
    expect(table.current()).toBe(second);
  });

  it('rebuilds lazily: a burst of changes costs one rebuild, delivered on the next turn', async () => {
    const table = new RouteTable(false);
    table.current();
    const listener = vi.fn<(state: RoutingState) => void>();
    table.onChange(listener);
    const versionBefore = table.current().version;

    for (let i = 0; i < 20; i++) {
      table.applySnapshot(snapshot(`p${i}`, 1, [`f${i}`], [httpTrigger(`t${i}`, `f${i}`, 'GET', `/r${i}`, i)]));
    }
    table.markChanged();
    table.removeOwner('p0');
    expect(listener).toHaveBeenCalledTimes(0);

    await nextTick();
    expect(listener).toHaveBeenCalledTimes(1);
    const state = listener.mock.calls[0]?.[0];
    expect(state?.version).toBe(versionBefore + 1);
    expect(state?.router.size).toBe(19);
    expect(table.current()).toBe(state);

    await nextTick();
    expect(listener).toHaveBeenCalledTimes(1);
  });

  it('a read right after a change rebuilds once; the scheduled rebuild then has nothing to do', async () => {
    const table = new RouteTable(false);
    table.current();
    const listener = vi.fn<(state: RoutingState) => void>();
    table.onChange(listener);
    table.applySnapshot(snapshot('p', 1, ['f'], [httpTrigger('t', 'f', 'GET', '/a', 1)]));
    table.applySnapshot(snapshot('p', 2, ['f'], [httpTrigger('t', 'f', 'GET', '/b', 1)]));
    expect(served(table.current(), 'GET', '/b')).toBe('f');
    expect(listener).toHaveBeenCalledTimes(1);
    await nextTick();
    expect(listener).toHaveBeenCalledTimes(1);

    // Rejected snapshots and removal of unknown owners do not rebuild.
    table.applySnapshot(snapshot('p', 1, [], []));
    table.removeOwner('unknown');
    await nextTick();
    expect(listener).toHaveBeenCalledTimes(1);
  });

  it('onChange returns an unsubscribe function', async () => {
    const table = new RouteTable(false);
    const listener = vi.fn<(state: RoutingState) => void>();
    const unsubscribe = table.onChange(listener);
    table.markChanged();
    await nextTick();
    expect(listener).toHaveBeenCalledTimes(1);
    unsubscribe();
    table.markChanged();
    await nextTick();
    expect(listener).toHaveBeenCalledTimes(1);
  });

  it('uses its trailing-slash mode for matching', () => {
    const table = new RouteTable(true);
    table.applySnapshot(
      snapshot('p', 1, ['f'], [httpTrigger('t', 'f', 'GET', '/a/', 1, { ignoreTrailingSlash: true })]),
    );
    expect(served(table.current(), 'GET', '/a')).toBe('f');
    expect(served(table.current(), 'GET', '/a/')).toBe('f');
  });

  it('builds and matches correctly with 10 000 routes', () => {
    const table = new RouteTable(false);
    const triggers: TriggerRecord[] = [];
    const functions: string[] = [];
    for (let i = 0; i < 10_000; i++) {
      const fn = `fn${i}`;
      functions.push(fn);
      // Mix shapes: static, one param, param in the middle.
      const apiPath = i % 3 === 0 ? `/s${i}` : i % 3 === 1 ? `/p${i}/:id` : `/m${i}/:id/items`;
      triggers.push(httpTrigger(`t${i}`, fn, i % 2 === 0 ? 'GET' : 'POST', apiPath, i));
    }
    table.applySnapshot(snapshot('p', 1, functions, triggers));
    const state = table.current();
    expect(state.router.size).toBe(10_000);
    expect(state.functionOwners.size).toBe(10_000);
    expect(served(state, 'GET', '/s0')).toBe('fn0');
    expect(served(state, 'POST', '/p1/abc')).toBe('fn1');
    expect(served(state, 'GET', '/m2/x/items')).toBe('fn2');
    expect(served(state, 'POST', '/s9999')).toBe('fn9999');
    expect(served(state, 'POST', '/p9997/z')).toBe('fn9997');
    expect(served(state, 'GET', '/p9997/z')).toBe('method_not_allowed');
    expect(served(state, 'GET', '/s9999')).toBe('method_not_allowed');
    expect(served(state, 'GET', '/s10000')).toBe('not_found');
    for (let i = 0; i < 10_000; i += 997) {
      const method = i % 2 === 0 ? 'GET' : 'POST';
      const path = i % 3 === 0 ? `/s${i}` : i % 3 === 1 ? `/p${i}/v` : `/m${i}/v/items`;
      expect(served(state, method, path)).toBe(`fn${i}`);
    }
  });
});

describe('RouteTable: departed workers (reconnect grace)', () => {
  const departed = (
    base: OwnerSnapshot,
    workerId: string,
    functionIds: string[],
    triggers: TriggerRecord[],
  ): OwnerSnapshot => ({ ...base, departed: [{ workerId, functionIds, triggers }] });

  it("keeps a departed worker's routes and awaits its functions while nobody serves them", () => {
    const table = new RouteTable(false);
    table.applySnapshot(departed(snapshot('p1', 1, [], []), 'gone', ['api::a'], [httpTrigger('t1', 'api::a', 'GET', '/a', 1)]));
    const state = table.current();
    expect(served(state, 'GET', '/a')).toBe('api::a');
    expect([...state.awaitedFunctions]).toEqual(['api::a']);
  });

  it('stops awaiting a function once any owner serves it again', () => {
    const table = new RouteTable(false);
    table.applySnapshot(departed(snapshot('p1', 1, [], []), 'gone', ['api::a'], [httpTrigger('t1', 'api::a', 'GET', '/a', 1)]));
    table.applySnapshot(snapshot('p2', 1, ['api::a'], [httpTrigger('t1', 'api::a', 'GET', '/a', 2)]));
    const state = table.current();
    expect(state.awaitedFunctions.size).toBe(0);
    expect(state.router.match('GET', '/a')).toMatchObject({ kind: 'matched', match: { route: { ownerId: 'p2' } } });
  });

  it('lets a live binding win over a departed one on the same route', () => {
    const table = new RouteTable(false);
    table.applySnapshot(snapshot('p1', 1, ['api::old'], [httpTrigger('old', 'api::old', 'GET', '/x', 1)]));
    // The departed binding is newer, but its function is gone: the older live binding serves.
    table.applySnapshot(departed(snapshot('p2', 1, [], []), 'gone', ['api::new'], [httpTrigger('new', 'api::new', 'GET', '/x', 9)]));
    expect(served(table.current(), 'GET', '/x')).toBe('api::old');
  });

  it("uses a departed worker's middleware only while its function is awaited (no double run)", () => {
    const mw = middlewareTrigger('m1', 'mw::auth', { phase: 'preHandler' }, 1);
    const gone = departed(snapshot('p1', 1, [], []), 'gone', ['mw::auth'], [mw]);
    const table = new RouteTable(false);
    table.applySnapshot(gone);
    expect(table.current().middleware.ordered.map((m) => m.functionId)).toEqual(['mw::auth']);
    // The worker reconnected (to another peer) and registered the same middleware again.
    table.applySnapshot(snapshot('p2', 1, ['mw::auth'], [{ ...mw, registeredAt: 2 }]));
    expect(table.current().middleware.ordered.map((m) => m.ownerId)).toEqual(['p2']);
  });
});

describe('RouteTable: a departed binding that a live one took over', () => {
  it('does not await the departed function: nothing should wait for it', () => {
    const table = new RouteTable(false);
    table.applySnapshot(snapshot('p1', 1, ['api::v1'], [httpTrigger('v1', 'api::v1', 'GET', '/x', 1)]));
    table.applySnapshot({
      ...snapshot('p2', 1, [], []),
      departed: [{ workerId: 'gone', functionIds: ['api::v2', 'api::called'], triggers: [httpTrigger('v2', 'api::v2', 'GET', '/x', 2)] }],
    });
    const state = table.current();
    expect(served(state, 'GET', '/x')).toBe('api::v1');
    // api::called had no trigger (other workers call it): still awaited.
    expect([...state.awaitedFunctions]).toEqual(['api::called']);
  });

  it('keeps awaiting a departed function that still has a binding nobody took over', () => {
    const table = new RouteTable(false);
    table.applySnapshot(snapshot('p1', 1, ['api::v1'], [httpTrigger('v1', 'api::v1', 'GET', '/x', 1)]));
    table.applySnapshot({
      ...snapshot('p2', 1, [], []),
      departed: [
        {
          workerId: 'gone',
          functionIds: ['api::v2'],
          triggers: [httpTrigger('v2', 'api::v2', 'GET', '/x', 2), httpTrigger('v2b', 'api::v2', 'GET', '/only-v2', 2)],
        },
      ],
    });
    const state = table.current();
    expect([...state.awaitedFunctions]).toEqual(['api::v2']);
    expect(served(state, 'GET', '/only-v2')).toBe('api::v2');
  });
});

describe('RouteTable ownership arbitration (each decision)', () => {
  const fn = (id: string, workerId: string, principal: string, registeredAt: number): FunctionRecord => ({ id, workerId, principal, registeredAt });
  const owned = (ownerId: string, functions: FunctionRecord[], extra: Partial<OwnerSnapshot> = {}): OwnerSnapshot => ({ ownerId, version: 1, functions, triggers: [], ...extra });
  const holderOf = (snapshots: OwnerSnapshot[]): { owners: readonly string[] | undefined; refused: string[] } => {
    const table = new RouteTable(false);
    for (const s of snapshots) table.applySnapshot(s);
    const state = table.current();
    return { owners: state.functionOwners.get('f'), refused: state.conflicts.filter((c) => c.kind === 'function').map((c) => `${c.ownerId}/${c.workerId}`) };
  };

  it('the older registration of a function holds it, whatever order the snapshots arrive in', () => {
    const older = owned('p2', [fn('f', 'w2', 'A', 1)]);
    const newer = owned('p1', [fn('f', 'w1', 'B', 2)]);
    const expected = { owners: ['p2'], refused: ['p1/w1'] };
    expect(holderOf([older, newer])).toEqual(expected);
    expect(holderOf([newer, older])).toEqual(expected);
  });

  it('equal timestamps: the lower owner id holds, then the lower worker id, in either arrival order', () => {
    const byOwner = [owned('p2', [fn('f', 'w1', 'A', 5)]), owned('p1', [fn('f', 'w9', 'B', 5)])];
    expect(holderOf(byOwner)).toEqual({ owners: ['p1'], refused: ['p2/w1'] });
    expect(holderOf([...byOwner].reverse())).toEqual({ owners: ['p1'], refused: ['p2/w1'] });
    const byWorker = [fn('f', 'w2', 'A', 5), fn('f', 'w1', 'B', 5)];
    expect(holderOf([owned('p1', byWorker)])).toEqual({ owners: ['p1'], refused: ['p1/w2'] });
    expect(holderOf([owned('p1', [...byWorker].reverse())])).toEqual({ owners: ['p1'], refused: ['p1/w2'] });
  });

  it("a departed worker keeps its function's principal through the grace: another principal cannot take it", () => {
    const away = owned('p1', [], { departed: [{ workerId: 'w1', principal: 'A', since: 1, functionIds: ['f'], triggers: [] }] });
    const taker = owned('p2', [fn('f', 'w2', 'B', 10)]);
    expect(holderOf([away, taker])).toEqual({ owners: undefined, refused: ['p2/w2'] });
    // Its own principal may come back (a reconnect), and a claim older than the departed one wins.
    expect(holderOf([away, owned('p2', [fn('f', 'w2', 'A', 10)])])).toEqual({ owners: ['p2'], refused: [] });
    expect(holderOf([away, owned('p2', [fn('f', 'w2', 'B', 0)])])).toEqual({ owners: ['p2'], refused: [] });
  });

  it('the same function on two path shapes of one method: another parameter name is a conflict, the same path a replica', () => {
    const table = new RouteTable(false);
    table.applySnapshot(snapshot('p1', 1, ['f'], [httpTrigger('t1', 'f', 'GET', '/items/:id', 1)]));
    table.applySnapshot(snapshot('p2', 1, ['f'], [httpTrigger('t2', 'f', 'GET', '/items/:key', 2)]));
    table.applySnapshot(snapshot('p3', 1, ['f'], [httpTrigger('t3', 'f', 'GET', '/items/:id', 3)]));
    const state = table.current();
    expect(state.conflicts.filter((c) => c.kind === 'route').map((c) => c.ownerId)).toEqual(['p2']);
    expect(state.routes.map((r) => `${r.ownerId} ${r.pattern.source}`)).toEqual(['p3 /items/:id']);
  });

  it('a departed binding stands in for its route until its principal registers it again, the newest departed one first', () => {
    const gone = (ownerId: string, at: number): OwnerSnapshot => ({
      ownerId,
      version: 1,
      functions: [],
      triggers: [],
      departed: [{ workerId: `w-${ownerId}`, since: at, functionIds: ['f'], triggers: [httpTrigger(`t-${ownerId}`, 'f', 'GET', '/a', at)] }],
    });
    const table = new RouteTable(false);
    table.applySnapshot(gone('p2', 2));
    table.applySnapshot(gone('p1', 1));
    expect(table.current().routes.map((r) => r.ownerId)).toEqual(['p2']);
    table.applySnapshot(snapshot('p3', 1, ['f'], [httpTrigger('t3', 'f', 'GET', '/a', 5)]));
    expect(table.current().routes.map((r) => r.ownerId)).toEqual(['p3']);
  });
});

describe('RouteTable: what each build keeps (mutation-tested decisions)', () => {
  it("keeps one metadata per function: the first held replica's; none for a function registered without, nor from a refused principal", () => {
    const table = new RouteTable(false);
    table.applySnapshot({ ownerId: 'p1', version: 1, functions: [{ id: 'f', workerId: 'w1', metadata: { v: 1 } }, { id: 'g', workerId: 'w1' }], triggers: [] });
    table.applySnapshot({ ownerId: 'p2', version: 1, functions: [{ id: 'f', workerId: 'w2', metadata: { v: 2 } }, { id: 'g', workerId: 'w2' }], triggers: [] });
    // h: the older claim (principal A, no metadata) holds; the refused principal's metadata is not shown.
    table.applySnapshot({
      ownerId: 'p3',
      version: 1,
      functions: [
        { id: 'h', workerId: 'w3', principal: 'A', registeredAt: 1 },
        { id: 'h', workerId: 'w4', principal: 'B', registeredAt: 2, metadata: { secret: true } },
      ],
      triggers: [],
    });
    const { functionMetadata } = table.current();
    expect(functionMetadata.get('f')).toEqual({ v: 1 });
    expect(functionMetadata.has('g')).toBe(false);
    expect(functionMetadata.has('h')).toBe(false);
  });

  it('serves module-config middleware as bindings config:<index> of owner "config", before registrations of equal priority', () => {
    const table = new RouteTable(false, [
      { functionId: 'mw::first', phase: 'preHandler', priority: 0 },
      { functionId: 'mw::second', phase: 'onRequest', priority: 5 },
    ]);
    table.applySnapshot(snapshot('p1', 1, ['mw::worker'], [middlewareTrigger('m1', 'mw::worker', { phase: 'preHandler' }, 0)]));
    const ordered = table.current().middleware.ordered;
    expect(ordered.map((m) => [m.triggerId, m.ownerId, m.functionId])).toEqual([
      ['config:0', 'config', 'mw::first'],
      ['m1', 'p1', 'mw::worker'],
      ['config:1', 'config', 'mw::second'],
    ]);
    expect(ordered[0]).toMatchObject({ phase: 'preHandler', priority: 0, registeredAt: 0, seq: 0 });
  });

  it('marks middleware registered through an rbac listener as restricted to its principal, and only that', () => {
    const table = new RouteTable(false);
    table.applySnapshot(
      snapshot('p1', 1, ['mw::r', 'mw::open'], [
        { ...middlewareTrigger('m1', 'mw::r', { phase: 'preHandler' }, 1), principal: 'rbac-listener-1' },
        { ...middlewareTrigger('m2', 'mw::open', { phase: 'preHandler' }, 2), principal: 'listener-0' },
      ]),
    );
    const [restricted, open] = table.current().middleware.ordered;
    expect(restricted).toMatchObject({ functionId: 'mw::r', restrictedTo: 'rbac-listener-1' });
    expect(open?.functionId).toBe('mw::open');
    expect(open).not.toHaveProperty('restrictedTo');
  });

  it("tells each peer's forward endpoint, the snapshots held and their versions", () => {
    const table = new RouteTable(false);
    const endpoint = { nodeId: 'n2', host: '10.0.0.2', port: 7000 };
    table.applySnapshot({ ...snapshot('p2', 3, [], []), endpoint });
    table.applySnapshot(snapshot('p3', 1, [], []));
    table.setLocalSource({ ownerId: 'local', snapshot: () => snapshot('local', 9, [], []) });
    expect(table.endpointOf('p2')).toEqual(endpoint);
    expect(table.endpointOf('p3')).toBeUndefined();
    expect(table.endpointOf('unknown')).toBeUndefined();
    expect(table.snapshotsHeld().map((s) => `${s.ownerId}@${s.version}`)).toEqual(['p2@3', 'p3@1', 'local@9']);
    // Peers only: the local process is not an owner whose snapshot it waits for.
    expect([...table.ownerVersions()]).toEqual([
      ['p2', 3],
      ['p3', 1],
    ]);
  });

  it('a live binding keeps its route over a newer departed replica of itself', () => {
    const table = new RouteTable(false);
    table.applySnapshot(snapshot('p1', 1, ['f'], [httpTrigger('live', 'f', 'GET', '/x', 1)]));
    table.applySnapshot({
      ...snapshot('p2', 1, [], []),
      departed: [{ workerId: 'gone', functionIds: ['f'], triggers: [httpTrigger('away', 'f', 'GET', '/x', 5)] }],
    });
    expect(table.current().routes.map((r) => `${r.ownerId} ${r.triggerId}`)).toEqual(['p1 live']);
  });

  it('says in a route conflict whether another principal holds the route', () => {
    const table = new RouteTable(false);
    table.applySnapshot(snapshot('p1', 1, ['f'], [httpTrigger('t1', 'f', 'GET', '/x', 1)]));
    table.applySnapshot(snapshot('p2', 1, ['g'], [httpTrigger('t2', 'g', 'GET', '/x', 2)]));
    table.applySnapshot(snapshot('p3', 1, [], [{ ...httpTrigger('t3', 'f', 'GET', '/x', 3), principal: 'rbac-listener-1' }]));
    const reasons = Object.fromEntries(table.current().conflicts.filter((c) => c.kind === 'route').map((c) => [c.ownerId, c.reason]));
    const earlier = 'conflicts with GET /x, registered earlier for function f';
    expect(reasons).toEqual({
      p2: `route GET /x ${earlier}; the earlier registration keeps the route`,
      p3: `route GET /x ${earlier} by another principal; the earlier registration keeps the route`,
    });
  });

  it('says which function a function conflict is about', () => {
    const table = new RouteTable(false);
    table.applySnapshot({ ownerId: 'p1', version: 1, functions: [{ id: 'f', workerId: 'w1', principal: 'A', registeredAt: 1 }], triggers: [] });
    table.applySnapshot({ ownerId: 'p2', version: 1, functions: [{ id: 'f', workerId: 'w2', principal: 'B', registeredAt: 2 }], triggers: [] });
    expect(table.current().conflicts).toEqual([
      { kind: 'function', ownerId: 'p2', workerId: 'w2', id: 'f', holderOwnerId: 'p1', samePrincipal: false, reason: 'function f is registered by another principal already' },
    ]);
  });

  it('a fresh table serves the state it was built with: the first read does not build again', () => {
    const table = new RouteTable(false);
    const listener = vi.fn<(state: RoutingState) => void>();
    table.onChange(listener);
    expect(table.current().version).toBe(1);
    expect(listener).not.toHaveBeenCalled();
  });

  it('delivers every later change too without a read, each on its own turn', async () => {
    const table = new RouteTable(false);
    const listener = vi.fn<(state: RoutingState) => void>();
    table.onChange(listener);
    table.applySnapshot(snapshot('p1', 1, ['f'], [httpTrigger('t1', 'f', 'GET', '/a', 1)]));
    await nextTick();
    table.applySnapshot(snapshot('p1', 2, ['f'], [httpTrigger('t1', 'f', 'GET', '/b', 1)]));
    await nextTick();
    expect(listener).toHaveBeenCalledTimes(2);
    expect(served(listener.mock.calls[1]![0], 'GET', '/b')).toBe('f');
  });

  it("gives a route its trigger's metadata (the handler's invocation metadata)", () => {
    const table = new RouteTable(false);
    table.applySnapshot(snapshot('p1', 1, ['f'], [{ ...httpTrigger('t1', 'f', 'GET', '/m', 1), metadata: { team: 'search' } }]));
    expect(table.current().routes[0]?.metadata).toEqual({ team: 'search' });
  });

  it("a binding without a principal is the main listener's: a replica of one registered as listener-0", () => {
    const table = new RouteTable(false);
    table.applySnapshot(snapshot('p1', 1, ['f'], [{ ...httpTrigger('t1', 'f', 'GET', '/x', 1), principal: 'listener-0' }]));
    table.applySnapshot(snapshot('p2', 1, ['f'], [httpTrigger('t2', 'f', 'GET', '/x', 2)]));
    const state = table.current();
    expect(state.conflicts).toEqual([]);
    expect(state.routes.map((r) => `${r.ownerId} ${r.principal}`)).toEqual(['p2 listener-0']);
  });
});

describe('Router: one route at a time', () => {
  it('set replaces the route of a method and shape, delete removes it and prunes what it leaves empty', () => {
    const r = router([]);
    r.set(route('GET', '/a/:id/b'));
    r.set(route('POST', '/a/:id/b'));
    r.set({ ...route('GET', '/a/:key/b'), id: 'replaced' });
    expect(r.size).toBe(2);
    expect(outcome(r.match('GET', '/a/1/b'))).toEqual(['replaced', { key: '1' }]);
    expect(r.delete('GET', pattern('/a/:other/b'))).toBe(true);
    expect(r.delete('GET', pattern('/a/:id/b'))).toBe(false);
    expect(r.delete('GET', pattern('/nowhere/at/all'))).toBe(false);
    expect(r.size).toBe(1);
    expect(r.match('GET', '/a/1/b')).toEqual({ kind: 'method_not_allowed', allow: ['POST'] });
    expect(r.delete('POST', pattern('/a/:id/b'))).toBe(true);
    expect(r.size).toBe(0);
    // Nothing is left behind: the trie is as empty as a new one.
    expect(r).toEqual(router([]));
  });

  it('after any sequence of sets and deletes, matches as a router built from the routes left', () => {
    const sources = ['/', '/a', '/a/', '/a/:x', '/a/b', '/a/:x/c', '/a/b/c', '/:x', '/:x/:y', '/a%2Fb', '/b/:x/c/:y'];
    const methods = ['GET', 'POST', 'HEAD'];
    const paths = ['/', '/a', '/a/', '/a/b', '/a/z', '/a/b/c', '/a/z/c', '/q', '/q/r', '/a%2Fb', '/b/1/c/2', '/b/1/c'];
    const op = fc.record({ add: fc.boolean(), method: fc.constantFrom(...methods), source: fc.constantFrom(...sources) });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), fc.boolean(), (ops, ignoreTrailingSlash) => {
        const live = router([], ignoreTrailingSlash);
        const held = new Map<string, TestRoute>();
        for (const { add, method, source } of ops) {
          const r = route(method, source, ignoreTrailingSlash);
          const key = `${method} ${r.pattern.shapeKey}`;
          if (add) {
            live.set(r);
            held.set(key, r);
          } else {
            expect(live.delete(method, r.pattern)).toBe(held.delete(key));
          }
        }
        const built = new Router([...held.values()], ignoreTrailingSlash);
        expect(live.size).toBe(built.size);
        for (const method of methods) for (const path of paths) expect(outcome(live.match(method, path))).toEqual(outcome(built.match(method, path)));
        if (held.size === 0) expect(live).toEqual(router([], ignoreTrailingSlash));
      }),
      { numRuns: 300 },
    );
  });
});

describe('RouteTable: incremental merge against the whole-table merge', () => {
  const owners = ['p1', 'p2', 'p3'] as const;
  const fnIds = ['f1', 'f2', 'f3', 'f4', 'f5'];
  // Unset is listener-0: most registrations share a principal, some compete from another.
  const principals = [undefined, 'listener-0', 'listener-0', 'rbac-listener-1'];
  // Few functions and paths, so that owners often compete for the same ones.
  const paths = ['/a', '/a/:x', '/a/:y', '/b'];
  const probePaths = ['/a', '/a/v', '/b', '/c'];

  const pool = fc.record({
    functions: fc.array(
      fc.record({ id: fc.constantFrom(...fnIds), workerId: fc.constantFrom('w1', 'w2'), principal: fc.constantFrom(...principals), registeredAt: fc.integer({ min: 0, max: 3 }), meta: fc.option(fc.integer({ min: 0, max: 9 })) }),
      { minLength: 1, maxLength: 3 },
    ),
    triggers: fc.array(
      fc.record({
        middleware: fc.boolean(),
        functionId: fc.constantFrom(...fnIds),
        method: fc.constantFrom('GET', 'POST'),
        path: fc.constantFrom(...paths),
        principal: fc.constantFrom(...principals),
        registeredAt: fc.integer({ min: 0, max: 3 }),
      }),
      { minLength: 1, maxLength: 7 },
    ),
    departed: fc.array(
      fc.record({
        principal: fc.constantFrom(...principals),
        since: fc.integer({ min: 0, max: 3 }),
        functionIds: fc.subarray(fnIds),
        triggers: fc.array(fc.record({ middleware: fc.boolean(), functionId: fc.constantFrom(...fnIds), path: fc.constantFrom(...paths), registeredAt: fc.integer({ min: 0, max: 3 }) }), { maxLength: 3 }),
      }),
      { maxLength: 2 },
    ),
  });
  type Pool = typeof pool extends fc.Arbitrary<infer P> ? P : never;

  interface Records {
    functions: FunctionRecord[];
    triggers: TriggerRecord[];
    departed: NonNullable<OwnerSnapshot['departed']>[number][];
  }

  /** One owner's records, made once: snapshots pick among the same objects, as the bus and the hub hand them on. */
  function records(ownerId: string, p: Pool): Records {
    let seq = 0;
    const make = (t: { middleware: boolean; functionId: string; path: string; registeredAt: number; method?: string; principal?: string | undefined }, workerId: string): TriggerRecord => {
      const base = t.middleware
        ? middlewareTrigger(`${ownerId}-t${seq}`, t.functionId, { phase: seq % 2 === 0 ? 'preHandler' : 'onRequest', priority: seq % 3, ...(seq % 4 === 0 ? { scope: { path: '/a' } } : {}) }, t.registeredAt, seq)
        : httpTrigger(`${ownerId}-t${seq}`, t.functionId, t.method ?? 'GET', t.path, t.registeredAt, { seq });
      seq++;
      return { ...base, workerId, ...(t.principal === undefined ? {} : { principal: t.principal }) };
    };
    return {
      functions: p.functions.map((f) => ({ id: f.id, workerId: f.workerId, registeredAt: f.registeredAt, ...(f.principal === undefined ? {} : { principal: f.principal }), ...(f.meta === null ? {} : { metadata: { v: f.meta } }) })),
      triggers: p.triggers.map((t, i) => make(t, i % 2 === 0 ? 'w1' : 'w2')),
      departed: p.departed.map((d, i) => ({
        workerId: `gone${i}`,
        since: d.since,
        functionIds: d.functionIds,
        ...(d.principal === undefined ? {} : { principal: d.principal }),
        // Mostly bindings of the functions it claims, as a worker's are.
        triggers: d.triggers.map((t, k) => make({ ...t, functionId: d.functionIds[k] ?? t.functionId, principal: d.principal }, `gone${i}`)),
      })),
    };
  }

  const pick = <T,>(list: readonly T[], mask: number): T[] => list.filter((_, i) => (mask >> i) & 1);

  /** Which records the next snapshot holds; `keep…`: the previous snapshot's array itself (nothing of that kind changed). */
  const change = { fns: fc.nat(), triggers: fc.nat(), departed: fc.nat(), keepFns: fc.boolean(), keepTriggers: fc.boolean(), keepDeparted: fc.boolean() };
  const op = fc.oneof(
    fc.record({ kind: fc.constant('apply' as const), owner: fc.constantFrom(...owners), ...change }),
    fc.record({ kind: fc.constant('remove' as const), owner: fc.constantFrom(...owners) }),
    fc.record({ kind: fc.constant('local' as const), ...change }),
    fc.record({ kind: fc.constant('read' as const) }),
  );

  function outcomeOf(result: MatchResult<{ method: string; pattern: PathPattern; triggerId: string; ownerId: string }>): unknown {
    return result.kind === 'matched' ? [result.match.route.triggerId, result.match.route.ownerId, { ...result.match.params }] : result.kind === 'method_not_allowed' ? result.allow : result.kind;
  }

  const sortedEntries = <V,>(map: ReadonlyMap<string, V>): [string, V][] => [...map].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const byJson = (list: readonly unknown[]): string[] => list.map((x) => JSON.stringify(x)).sort();

  function expectSameAsWholeMerge(table: RouteTable): void {
    const state = table.current();
    const reference = referenceBuild(table.snapshotsHeld(), []);
    const keyOf = (r: { method: string; pattern: PathPattern }): string => `${r.method} ${r.pattern.shapeKey}`;
    const sortRoutes = (routes: readonly { method: string; pattern: PathPattern }[]): string[] => byJson(routes.map((r) => ({ ...r, key: keyOf(r) })));
    expect(sortRoutes(state.routes)).toEqual(sortRoutes(reference.routes));
    expect(state.router.size).toBe(reference.routes.length);
    const built = new Router(reference.routes, false);
    for (const method of ['GET', 'POST', 'HEAD']) for (const path of probePaths) expect(outcomeOf(state.router.match(method, path))).toEqual(outcomeOf(built.match(method, path)));
    expect(byJson(state.conflicts)).toEqual(byJson(reference.conflicts));
    expect(sortedEntries(state.functionOwners)).toEqual(sortedEntries(reference.functionOwners));
    expect(sortedEntries(state.functionMetadata)).toEqual(sortedEntries(reference.functionMetadata));
    expect([...state.awaitedFunctions].sort()).toEqual([...reference.awaitedFunctions].sort());
    expect(state.middleware.ordered).toEqual(reference.middleware);
  }

  const departedOn = (path: string, functionId: string, at: number): OwnerSnapshot => ({
    ownerId: 'p2',
    version: 1,
    functions: [],
    triggers: [],
    departed: [{ workerId: 'gone', since: at, functionIds: [functionId], triggers: [httpTrigger('away', functionId, 'GET', path, at)] }],
  });

  it("awaits a departed binding's function again when the live binding that took its route over loses its worker's function", () => {
    const table = new RouteTable(false);
    const taker = httpTrigger('taker', 'g', 'GET', '/x', 2);
    table.applySnapshot({ ownerId: 'p1', version: 1, functions: [{ id: 'g', workerId: 'w' }], triggers: [taker] });
    table.applySnapshot(departedOn('/x', 'f', 1));
    expect([...table.current().awaitedFunctions]).toEqual([]);
    // Only p1's function record goes: its binding (the same record) still holds /x, for a function nobody serves.
    table.applySnapshot({ ownerId: 'p1', version: 2, functions: [], triggers: [taker] });
    expect([...table.current().awaitedFunctions]).toEqual(['f']);
  });

  it("stops awaiting a departed binding's function when a binding of a function already served takes its route over", () => {
    const table = new RouteTable(false);
    const functions: FunctionRecord[] = [{ id: 'g', workerId: 'w' }];
    table.applySnapshot({ ownerId: 'p1', version: 1, functions, triggers: [] });
    table.applySnapshot(departedOn('/x', 'f', 1));
    expect([...table.current().awaitedFunctions]).toEqual(['f']);
    table.applySnapshot({ ownerId: 'p1', version: 2, functions, triggers: [httpTrigger('taker', 'g', 'GET', '/x', 2)] });
    expect([...table.current().awaitedFunctions]).toEqual([]);
  });

  it('puts an owner removed and back within one burst after the others, as a newcomer', () => {
    const table = new RouteTable(false);
    const p1 = snapshot('p1', 1, ['f'], []);
    table.applySnapshot(p1);
    table.applySnapshot(snapshot('p2', 1, ['f'], []));
    expect(table.current().functionOwners.get('f')).toEqual(['p1', 'p2']);
    table.removeOwner('p1');
    table.applySnapshot({ ...p1, version: 2 });
    expect(table.current().functionOwners.get('f')).toEqual(['p2', 'p1']);
  });

  it('decides after any sequence of snapshots, removals and local changes exactly what merging every snapshot whole decides', () => {
    fc.assert(
      fc.property(fc.record({ p1: pool, p2: pool, p3: pool, local: pool }), fc.array(op, { minLength: 1, maxLength: 25 }), (pools, ops) => {
        const recordsOf = { p1: records('p1', pools.p1), p2: records('p2', pools.p2), p3: records('p3', pools.p3), local: records('local', pools.local) };
        const table = new RouteTable(false);
        const versions = new Map<string, number>();
        const last = new Map<string, OwnerSnapshot>();
        const next = (ownerId: keyof typeof recordsOf, o: { fns: number; triggers: number; departed: number; keepFns: boolean; keepTriggers: boolean; keepDeparted: boolean }): OwnerSnapshot => {
          const r = recordsOf[ownerId];
          const version = (versions.get(ownerId) ?? 0) + 1;
          versions.set(ownerId, version);
          // Also after a removal: a peer that comes back hands on the same records.
          const previous = last.get(ownerId);
          const departed = o.keepDeparted && previous !== undefined ? previous.departed : pick(r.departed, o.departed);
          const snap: OwnerSnapshot = {
            ownerId,
            version,
            functions: o.keepFns && previous !== undefined ? previous.functions : pick(r.functions, o.fns),
            triggers: o.keepTriggers && previous !== undefined ? previous.triggers : pick(r.triggers, o.triggers),
            ...(departed !== undefined && departed.length > 0 ? { departed } : {}),
          };
          last.set(ownerId, snap);
          return snap;
        };
        let local: OwnerSnapshot = { ownerId: 'local', version: 0, functions: [], triggers: [] };
        table.setLocalSource({ ownerId: 'local', snapshot: () => local });
        for (const o of ops) {
          if (o.kind === 'apply') table.applySnapshot(next(o.owner, o));
          else if (o.kind === 'remove') {
            table.removeOwner(o.owner);
          } else if (o.kind === 'local') {
            local = next('local', o);
            table.markChanged();
          } else expectSameAsWholeMerge(table);
        }
        expectSameAsWholeMerge(table);
      }),
      { numRuns: 400 },
    );
  });
});

describe('OwnerIndex: what a change touches', () => {
  const many = Array.from({ length: 100 }, (_, i) => httpTrigger(`t${i}`, 'f', 'GET', `/r/${i}`, i, { seq: i }));
  const functions: FunctionRecord[] = [{ id: 'f', workerId: 'w' }];
  const base: OwnerSnapshot = { ownerId: 'p', version: 1, functions, triggers: many };
  const keysOf = (touched: Touched): string[] => [...touched.keys].sort();

  function indexed(): OwnerIndex {
    const index = new OwnerIndex('p', 0);
    const first = nothingTouched();
    index.update(base, first);
    expect(first.keys.size).toBe(100);
    expect([...first.functions]).toEqual(['f']);
    return index;
  }

  it('one route appended to an owner of many: that route key, nothing else', () => {
    const index = indexed();
    const touched = nothingTouched();
    index.update({ ...base, version: 2, triggers: [...many, httpTrigger('new', 'f', 'POST', '/r/:id', 200, { seq: 200 })] }, touched);
    expect(touched).toEqual({ keys: new Set(['POST /r/:']), functions: new Set(), departedFunctions: new Set(), middleware: false });
    expect(index.live.get('POST /r/:')?.map((t) => t.id)).toEqual(['new']);
  });

  it('one route removed from the middle, or replaced by a new record: that route key only', () => {
    const index = indexed();
    const removed = nothingTouched();
    index.update({ ...base, version: 2, triggers: many.filter((_, i) => i !== 50) }, removed);
    expect(keysOf(removed)).toEqual(['GET /r/50']);
    expect(index.hasKey('GET /r/50')).toBe(false);
    expect(index.hasKey('GET /r/49')).toBe(true);
    const replaced = nothingTouched();
    index.update({ ...base, version: 3, triggers: many.map((t, i) => (i === 7 ? { ...t } : t)).filter((_, i) => i !== 50) }, replaced);
    expect(keysOf(replaced)).toEqual(['GET /r/7']);
    expect(index.live.get('GET /r/7')).toHaveLength(1);
  });

  it('a function record added: that function id; middleware: the middleware flag, no route key', () => {
    const index = indexed();
    const touched = nothingTouched();
    index.update({ ...base, version: 2, functions: [...functions, { id: 'g', workerId: 'w' }], triggers: [...many, middlewareTrigger('m', 'g', { phase: 'preHandler' }, 1)] }, touched);
    expect(touched).toEqual({ keys: new Set(), functions: new Set(['g']), departedFunctions: new Set(), middleware: true });
    expect(index.liveMiddleware.map((t) => t.id)).toEqual(['m']);
    const gone = nothingTouched();
    index.update({ ...base, version: 3 }, gone);
    expect(gone).toEqual({ keys: new Set(), functions: new Set(['g']), departedFunctions: new Set(), middleware: true });
    expect(index.liveMiddleware).toEqual([]);
    expect(index.hasFunction('g')).toBe(false);
  });

  it('a worker departing: its functions and route keys, as departed', () => {
    const index = indexed();
    const away = httpTrigger('away', 'h', 'GET', '/away', 1, { seq: 500 });
    const departed = [{ workerId: 'gone', functionIds: ['h'], triggers: [away, middlewareTrigger('am', 'h', { phase: 'onRequest' }, 1, 501)] }];
    const touched = nothingTouched();
    index.update({ ...base, version: 2, departed }, touched);
    expect(touched).toEqual({ keys: new Set(['GET /away']), functions: new Set(['h']), departedFunctions: new Set(['h']), middleware: true });
    expect(index.departed.get('GET /away')).toEqual([away]);
    expect(index.claims.get('h')).toEqual(departed);
    expect(index.departedMiddleware.map((t) => t.id)).toEqual(['am']);
    expect(index.hasFunction('h')).toBe(true);
    const back = nothingTouched();
    index.update({ ...base, version: 3 }, back);
    expect(back).toEqual(touched);
    expect(index.hasKey('GET /away')).toBe(false);
    expect(index.hasFunction('h')).toBe(false);
  });

  it('an owner gone: everything it held, and nothing held after', () => {
    const index = indexed();
    const touched = nothingTouched();
    index.update(undefined, touched);
    expect(touched.keys.size).toBe(100);
    expect([...touched.functions]).toEqual(['f']);
    expect(index.hasKey('GET /r/0')).toBe(false);
    expect(index.hasFunction('f')).toBe(false);
  });

  it('keeps two records of one function in snapshot order (the first one’s metadata is shown)', () => {
    const index = new OwnerIndex('p', 0);
    const a: FunctionRecord = { id: 'f', workerId: 'a', metadata: { v: 'a' } };
    const b: FunctionRecord = { id: 'f', workerId: 'b', metadata: { v: 'b' } };
    index.update({ ownerId: 'p', version: 1, functions: [a, b], triggers: [] }, nothingTouched());
    const a2: FunctionRecord = { ...a, metadata: { v: 'a2' } };
    index.update({ ownerId: 'p', version: 2, functions: [a2, b], triggers: [] }, nothingTouched());
    expect(index.functions.get('f')?.map((fn) => fn.workerId)).toEqual(['a', 'b']);
    expect(index.functions.get('f')?.[0]).toBe(a2);
  });
});

describe('RouteTable: what a change costs, and what it leaves behind', () => {
  const many = (ownerId: string, n: number): TriggerRecord[] => Array.from({ length: n }, (_, i) => httpTrigger(`${ownerId}-${i}`, `${ownerId}::fn`, 'GET', `/${ownerId}/${i}`, i, { seq: i }));
  // One function record per owner, the same object in each of its snapshots (as the hub and the bus hand it on).
  const functionsOf = new Map<string, FunctionRecord[]>();
  const fns = (ownerId: string): FunctionRecord[] => {
    let list = functionsOf.get(ownerId);
    if (list === undefined) functionsOf.set(ownerId, (list = [{ id: `${ownerId}::fn`, workerId: 'w' }]));
    return list;
  };
  const peer = (ownerId: string, version: number, triggers: TriggerRecord[], functions: FunctionRecord[] = fns(ownerId)): OwnerSnapshot => ({ ownerId, version, functions, triggers });
  const noWork = { owners: 0, routeKeys: 0, functions: 0, awaited: 0, routerUpdates: 0, middleware: false };

  it('one route added to a peer of many, in a table of many: one owner, one route key, one router update', () => {
    const table = new RouteTable(false);
    const p1 = many('p1', 300);
    table.applySnapshot(peer('p1', 1, p1));
    table.applySnapshot(peer('p2', 1, many('p2', 300)));
    expect(table.current().work).toEqual({ owners: 2, routeKeys: 600, functions: 2, awaited: 2, routerUpdates: 600, middleware: false });
    table.applySnapshot(peer('p1', 2, [...p1, httpTrigger('extra', 'p1::fn', 'POST', '/p1/0', 400, { seq: 400 })]));
    expect(table.current().work).toEqual({ ...noWork, owners: 1, routeKeys: 1, routerUpdates: 1 });
    // Dropped again: the same.
    table.applySnapshot(peer('p1', 3, p1));
    const state = table.current();
    expect(state.work).toEqual({ ...noWork, owners: 1, routeKeys: 1, routerUpdates: 1 });
    expect(state.router.size).toBe(600);
  });

  it('a binding that loses its route decides the route again but leaves the router as it was', () => {
    const table = new RouteTable(false);
    table.applySnapshot(peer('p1', 1, [httpTrigger('old', 'p1::fn', 'GET', '/x', 1)]));
    const before = table.current().router.match('GET', '/x');
    table.applySnapshot(peer('p2', 1, [httpTrigger('new', 'p2::fn', 'GET', '/x', 2)]));
    const state = table.current();
    expect(state.work).toEqual({ ...noWork, owners: 1, routeKeys: 1, functions: 1, awaited: 1 });
    expect(state.conflicts.map((c) => c.id)).toEqual(['new']);
    // The same route object: nothing in the router changed.
    expect(state.router.match('GET', '/x')).toEqual(before);
    if (before.kind === 'matched') expect((state.router.match('GET', '/x') as typeof before).match.route).toBe(before.match.route);
  });

  it('a read with no change, or a local source that did not change, decides nothing again', () => {
    const table = new RouteTable(false);
    const local = peer('local', 1, many('local', 10));
    table.setLocalSource({ ownerId: 'local', snapshot: () => local });
    table.current();
    table.markChanged();
    expect(table.current().work).toEqual({ ...noWork, owners: 1 });
  });

  it('a worker departing and its grace ending: the awaited checks of its function, and the middleware list', () => {
    const table = new RouteTable(false);
    const mw = middlewareTrigger('m', 'p1::fn', { phase: 'preHandler' }, 1, 99);
    const live = peer('p1', 1, [httpTrigger('t', 'p1::fn', 'GET', '/x', 1), mw]);
    table.applySnapshot(live);
    table.current();
    table.applySnapshot({ ...peer('p1', 2, [], []), departed: [{ workerId: 'w', functionIds: ['p1::fn'], triggers: live.triggers }] });
    const away = table.current();
    expect(away.work).toEqual({ owners: 1, routeKeys: 1, functions: 1, awaited: 1, routerUpdates: 0, middleware: true });
    expect([...away.awaitedFunctions]).toEqual(['p1::fn']);
    expect(away.middleware.ordered.map((m) => m.triggerId)).toEqual(['m']);
    table.applySnapshot(peer('p1', 3, [], []));
    const gone = table.current();
    expect(gone.work).toEqual({ owners: 1, routeKeys: 1, functions: 1, awaited: 1, routerUpdates: 1, middleware: true });
    expect(gone.awaitedFunctions.size).toBe(0);
    expect(gone.middleware.ordered).toEqual([]);
  });

  it('keeps the middleware index (and its selection cache) while the middleware list stays the same', () => {
    const table = new RouteTable(false, [{ functionId: 'cfg', phase: 'onRequest', priority: 0 }]);
    const first = table.current().middleware;
    // A function becomes awaited (a departed worker's), with no middleware of its own: the list is re-derived, unchanged.
    table.applySnapshot({ ...peer('p1', 1, [], []), departed: [{ workerId: 'w', functionIds: ['f'], triggers: [] }] });
    const awaited = table.current();
    expect([...awaited.awaitedFunctions]).toEqual(['f']);
    expect(awaited.work.middleware).toBe(true);
    expect(awaited.middleware).toBe(first);
    // The same with a worker's middleware in the list.
    const m = middlewareTrigger('m', 'mw::m', { phase: 'preHandler' }, 1, 3);
    table.applySnapshot(peer('p4', 1, [m]));
    const withM = table.current().middleware;
    table.applySnapshot({ ...peer('p5', 1, [], []), departed: [{ workerId: 'w', functionIds: ['f2'], triggers: [] }] });
    const awaitedAgain = table.current();
    expect(awaitedAgain.work.middleware).toBe(true);
    expect(awaitedAgain.middleware).toBe(withM);
    table.removeOwner('p4');
    table.current();
    // One middleware replaced by another in one change: a new index, with the new one.
    const a = middlewareTrigger('a', 'mw::a', { phase: 'preHandler' }, 1, 1);
    const b = middlewareTrigger('b', 'mw::b', { phase: 'preHandler' }, 2, 2);
    table.applySnapshot(peer('p2', 1, [a]));
    const withA = table.current().middleware;
    expect(withA).not.toBe(first);
    table.applySnapshot(peer('p2', 2, [b]));
    const withB = table.current().middleware;
    expect(withB.ordered.map((m) => m.triggerId)).toEqual(['config:0', 'b']);
    // A route change leaves it alone.
    table.applySnapshot(peer('p3', 1, [httpTrigger('r', 'p3::fn', 'GET', '/r', 1)]));
    expect(table.current().middleware).toBe(withB);
  });

  it('forgets route keys, functions and refusals no owner holds any more', () => {
    const table = new RouteTable(false);
    const local = peer('local', 1, [], []);
    table.setLocalSource({ ownerId: 'local', snapshot: () => local });
    const p2 = many('p2', 3);
    table.applySnapshot(peer('p1', 1, many('p1', 5)));
    table.applySnapshot({ ...peer('p2', 1, p2), departed: [{ workerId: 'w', functionIds: ['gone::fn'], triggers: [httpTrigger('g', 'gone::fn', 'GET', '/g', 1)] }] });
    // p3 binds p1's first path too, later: refused.
    table.applySnapshot(peer('p3', 1, [httpTrigger('late', 'p3::fn', 'GET', '/p1/0', 100)]));
    expect(table.current() && table.sizes()).toEqual({ owners: 4, routeKeys: 9, functions: 4, conflicted: 1 });
    table.applySnapshot(peer('p2', 2, p2));
    table.removeOwner('p3');
    expect(table.current() && table.sizes()).toEqual({ owners: 3, routeKeys: 8, functions: 2, conflicted: 0 });
    table.removeOwner('p1');
    table.removeOwner('p2');
    const state = table.current();
    expect(table.sizes()).toEqual({ owners: 1, routeKeys: 0, functions: 0, conflicted: 0 });
    expect(state.functionOwners.size).toBe(0);
    expect([...state.functionOwners]).toEqual([]);
    expect(state.router).toEqual(new RouteTable(false).current().router);
  });

  it('a route added and dropped within one burst leaves nothing', () => {
    const table = new RouteTable(false);
    const kept = peer('p1', 1, [httpTrigger('a', 'p1::fn', 'GET', '/a', 1)]);
    table.applySnapshot(kept);
    table.current();
    table.applySnapshot(peer('p1', 2, [...kept.triggers, httpTrigger('b', 'p1::fn', 'GET', '/b', 2)]));
    table.applySnapshot(peer('p1', 3, [...kept.triggers]));
    const state = table.current();
    expect(state.work).toEqual({ ...noWork, owners: 1 });
    expect(state.router.size).toBe(1);
  });

  it('a function whose records change but that stays served rechecks only itself, not the departed bindings its routes took over', () => {
    const table = new RouteTable(false);
    const taker = httpTrigger('taker', 'g', 'GET', '/x', 2);
    table.applySnapshot(peer('p1', 1, [taker], [{ id: 'g', workerId: 'w' }]));
    table.applySnapshot({ ...peer('p2', 1, [], []), departed: [{ workerId: 'gone', since: 1, functionIds: ['f'], triggers: [httpTrigger('away', 'f', 'GET', '/x', 1)] }] });
    expect(table.current().awaitedFunctions.size).toBe(0);
    // g's record replaced (new metadata): g is still served, so f's binding is still taken over.
    table.applySnapshot(peer('p1', 2, [taker], [{ id: 'g', workerId: 'w', metadata: { v: 2 } }]));
    const state = table.current();
    expect(state.work).toEqual({ ...noWork, owners: 1, functions: 1, awaited: 1 });
    expect(state.functionMetadata.get('g')).toEqual({ v: 2 });
  });

  it('tells which remote owners changed since the previous build, and which route patterns left', () => {
    const table = new RouteTable(false);
    const local = peer('local', 1, []);
    table.setLocalSource({ ownerId: 'local', snapshot: () => local });
    const get = httpTrigger('a', 'p1::fn', 'GET', '/a/:id', 1);
    const post = httpTrigger('b', 'p1::fn', 'POST', '/a/:id', 2);
    table.applySnapshot(peer('p1', 1, [get, post]));
    table.applySnapshot(peer('p2', 1, [httpTrigger('c', 'p2::fn', 'GET', '/c', 3)]));
    const first = table.current();
    expect([...first.changedOwners].sort()).toEqual(['p1', 'p2']);
    expect(table.routesPattern('/a/:id')).toBe(true);
    expect(table.routesPattern('/nope')).toBe(false);
    // The local process changing is no remote owner's change.
    table.markChanged();
    expect([...table.current().changedOwners]).toEqual([]);
    // One of two routes of a pattern goes: the pattern is still routed.
    table.applySnapshot(peer('p1', 2, [post]));
    const one = table.current();
    expect([...one.changedOwners]).toEqual(['p1']);
    expect(one.work.routerUpdates).toBe(1);
    expect(one.routesLeft).toEqual([]);
    expect(table.routesPattern('/a/:id')).toBe(true);
    // The other goes too, and so does /c: both patterns left.
    table.applySnapshot(peer('p1', 3, []));
    table.removeOwner('p2');
    const none = table.current();
    expect([...none.routesLeft].sort()).toEqual(['/a/:id', '/c']);
    expect(table.routesPattern('/a/:id')).toBe(false);
    expect(table.routesPattern('/c')).toBe(false);
    // A pattern whose binding is replaced by another of the same pattern did not leave.
    table.applySnapshot(peer('p3', 1, [httpTrigger('d', 'p3::fn', 'GET', '/d', 5)]));
    table.current();
    table.applySnapshot(peer('p3', 2, [httpTrigger('d2', 'p3::fn', 'GET', '/d', 6)]));
    const replaced = table.current();
    expect(replaced.work.routerUpdates).toBe(1);
    expect(replaced.routesLeft).toEqual([]);
    expect(table.routesPattern('/d')).toBe(true);
  });

  it('drops the previous local source when another takes its place', () => {
    const table = new RouteTable(false);
    table.setLocalSource({ ownerId: 'a', snapshot: () => peer('a', 1, [httpTrigger('a', 'a::fn', 'GET', '/a', 1)]) });
    expect(served(table.current(), 'GET', '/a')).toBe('a::fn');
    table.setLocalSource({ ownerId: 'b', snapshot: () => peer('b', 1, [httpTrigger('b', 'b::fn', 'GET', '/b', 1)]) });
    const state = table.current();
    expect(served(state, 'GET', '/a')).toBe('not_found');
    expect(served(state, 'GET', '/b')).toBe('b::fn');
    expect(state.work.owners).toBe(2);
  });

  it('without a local source, holds only the peers', () => {
    const table = new RouteTable(false);
    table.applySnapshot(peer('p1', 1, []));
    expect(table.snapshotsHeld().map((s) => s.ownerId)).toEqual(['p1']);
    expect(table.current() && table.sizes().owners).toBe(1);
  });

  it('queues one rebuild for a burst of changes, not one per change', () => {
    const spy = vi.spyOn(globalThis, 'setImmediate');
    try {
      const table = new RouteTable(false);
      for (let i = 0; i < 50; i++) table.applySnapshot(peer(`p${i}`, 1, []));
      table.markChanged();
      expect(spy).toHaveBeenCalledTimes(1);
    } finally {
      spy.mockRestore();
    }
  });
});
