import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { MiddlewarePhase } from '../../src/config/types.js';
import { MiddlewareIndex } from '../../src/routing/middleware-index.js';
import type { MiddlewareBinding, TriggerRecord } from '../../src/routing/registrations.js';
import { RouteTable } from '../../src/routing/route-table.js';
import { validateTrigger } from '../../src/routing/trigger-config.js';

// MiddlewareIndex (docs/middleware.md#order-and-scope): per-phase selection by scope, in execution order.

const PHASES: readonly MiddlewarePhase[] = ['onRequest', 'preHandler', 'postHandler', 'onResponse', 'onError', 'onTimeout'];

interface BindingSpec {
  phase?: MiddlewarePhase;
  scope?: string;
  priority?: number;
  registeredAt?: number;
  ownerId?: string;
  seq?: number;
}

let nextSeq = 0;
/** A binding whose triggerId is `id` (and functionId `fn:<id>`); registration order = creation order. */
function binding(id: string, spec: BindingSpec = {}): MiddlewareBinding {
  const b: MiddlewareBinding = {
    triggerId: id,
    functionId: `fn:${id}`,
    ownerId: spec.ownerId ?? 'owner',
    phase: spec.phase ?? 'preHandler',
    priority: spec.priority ?? 0,
    registeredAt: spec.registeredAt ?? 1000,
    seq: spec.seq ?? ++nextSeq,
  };
  if (spec.scope !== undefined) b.scopePath = spec.scope;
  return b;
}

const ids = (list: readonly MiddlewareBinding[]): string[] => list.map((b) => b.triggerId);
const select = (index: MiddlewareIndex, path: string, phase: MiddlewarePhase = 'preHandler'): string[] => ids(index.select(phase, path));

describe('MiddlewareIndex: order', () => {
  it('runs lower priority first, negative and fractional priorities included', () => {
    const index = new MiddlewareIndex(
      [binding('p10', { priority: 10 }), binding('p0'), binding('neg', { priority: -3 }), binding('half', { priority: 0.5 }), binding('p2', { priority: 2 })],
      false,
    );
    expect(select(index, '/x')).toEqual(['neg', 'p0', 'half', 'p2', 'p10']);
  });

  it('breaks priority ties by registration: registeredAt, then owner id, then seq', () => {
    const index = new MiddlewareIndex(
      [
        binding('late', { registeredAt: 300, seq: 1 }),
        binding('b-owner', { registeredAt: 200, ownerId: 'b', seq: 1 }),
        binding('a-owner-seq9', { registeredAt: 200, ownerId: 'a', seq: 9 }),
        binding('a-owner-seq3', { registeredAt: 200, ownerId: 'a', seq: 3 }),
        binding('early', { registeredAt: 100, ownerId: 'z', seq: 50 }),
      ],
      false,
    );
    expect(select(index, '/')).toEqual(['early', 'a-owner-seq3', 'a-owner-seq9', 'b-owner', 'late']);
    expect(ids(index.ordered)).toEqual(['early', 'a-owner-seq3', 'a-owner-seq9', 'b-owner', 'late']);
  });

  it('orders scoped and global middleware together by priority, then registration', () => {
    const index = new MiddlewareIndex(
      [
        binding('scoped-p1', { scope: '/api', priority: 1, registeredAt: 1 }),
        binding('global-p1', { priority: 1, registeredAt: 2 }),
        binding('global-p5', { priority: 5, registeredAt: 0 }),
        binding('scoped-p0', { scope: '/api/*', registeredAt: 9 }),
        binding('root-p1', { scope: '/', priority: 1, registeredAt: 3 }),
      ],
      false,
    );
    expect(select(index, '/api/x')).toEqual(['scoped-p0', 'scoped-p1', 'global-p1', 'root-p1', 'global-p5']);
    expect(select(index, '/api')).toEqual(['scoped-p1', 'global-p1', 'root-p1', 'global-p5']);
    expect(select(index, '/other')).toEqual(['global-p1', 'root-p1', 'global-p5']);
  });

  it('keeps phases apart', () => {
    const bindings = PHASES.map((phase) => binding(phase, { phase }));
    const scoped = PHASES.map((phase) => binding(`${phase}-scoped`, { phase, scope: '/s' }));
    const index = new MiddlewareIndex([...bindings, ...scoped], false);
    for (const phase of PHASES) {
      expect(select(index, '/s/x', phase)).toEqual([phase, `${phase}-scoped`]);
      expect(select(index, '/t', phase)).toEqual([phase]);
    }
  });

  it('puts RestApiModule `middleware` entries first among equal priorities, in configuration order', () => {
    const table = new RouteTable(false, [
      { functionId: 'cfg::late', phase: 'preHandler', priority: 10 },
      { functionId: 'cfg::first', phase: 'preHandler', priority: 0 },
      { functionId: 'cfg::second', phase: 'preHandler', priority: 0 },
      { functionId: 'cfg::resp', phase: 'onResponse', priority: -1 },
    ]);
    const trigger = (id: string, functionId: string, config: Record<string, unknown>, registeredAt: number): TriggerRecord => {
      const validated = validateTrigger('http_middleware', config, false);
      if (!validated.ok) throw new Error(validated.message);
      return { ...validated.spec, id, functionId, workerId: 'w', registeredAt, seq: 0 };
    };
    table.applySnapshot({
      ownerId: 'aaa',
      version: 1,
      functions: [],
      triggers: [
        trigger('t-p0', 'trig::p0', { phase: 'preHandler' }, 1),
        trigger('t-p10', 'trig::p10', { phase: 'preHandler', priority: 10 }, 2),
        trigger('t-neg', 'trig::neg', { phase: 'preHandler', scope: { path: '/api' }, priority: -1 }, 3),
      ],
    });
    const index = table.current().middleware;
    expect(index.select('preHandler', '/api/x').map((b) => b.functionId)).toEqual([
      'trig::neg',
      'cfg::first',
      'cfg::second',
      'trig::p0',
      'cfg::late',
      'trig::p10',
    ]);
    expect(index.select('preHandler', '/else').map((b) => b.functionId)).toEqual(['cfg::first', 'cfg::second', 'trig::p0', 'cfg::late', 'trig::p10']);
    expect(index.select('onResponse', '/').map((b) => b.functionId)).toEqual(['cfg::resp']);
    expect(index.select('onResponse', '/')[0]).toStrictEqual({
      triggerId: 'config:3',
      functionId: 'cfg::resp',
      ownerId: 'config',
      phase: 'onResponse',
      priority: -1,
      registeredAt: 0,
      seq: 3,
    });
  });
});

describe('MiddlewareIndex: scope', () => {
  const cases: [scope: string, covered: string[], notCovered: string[]][] = [
    ['/admin', ['/admin', '/admin/', '/admin/x', '/admin/x/y', '/admin//x'], ['/', '/adminx', '/admi', '/other/admin', '/x/admin']],
    ['/admin/*', ['/admin/x', '/admin/x/y', '/admin/', '/admin//'], ['/admin', '/adminx', '/', '/other']],
    ['/api/v1', ['/api/v1', '/api/v1/users'], ['/api', '/api/v2', '/api/v10', '/api/v1x/y']],
    ['/users/:id', ['/users/1', '/users/abc/posts', '/users/%20'], ['/users', '/users/', '/user/1']],
    ['/users/:id/posts', ['/users/1/posts', '/users/x/posts/9'], ['/users/1', '/users/1/postsx', '/users//posts', '/users/1/comments']],
    ['/users/:id/*', ['/users/1/posts', '/users/1/'], ['/users/1', '/users/', '/users']],
    ['/:tenant/admin', ['/acme/admin', '/x/admin/y'], ['/admin', '//admin', '/acme/other']],
    ['/a/b/c', ['/a/b/c', '/a/b/c/d'], ['/a/b', '/a', '/a/b/cd']],
    // A scope registered with a trailing slash is the same prefix.
    ['/admin/', ['/admin', '/admin/x'], ['/adminx']],
  ];

  for (const [scope, covered, notCovered] of cases) {
    it(`scope ${scope}`, () => {
      const index = new MiddlewareIndex([binding('m', { scope })], false);
      for (const path of covered) expect({ path, got: select(index, path) }).toEqual({ path, got: ['m'] });
      for (const path of notCovered) expect({ path, got: select(index, path) }).toEqual({ path, got: [] });
    });
  }

  it('global middleware (no scope, "/", "/*") covers every path, "/" included', () => {
    const index = new MiddlewareIndex([binding('none'), binding('root', { scope: '/' }), binding('star', { scope: '/*' })], false);
    for (const path of ['/', '/a', '/a/b/c', '/a/', '//', '/%61']) expect(select(index, path)).toEqual(['none', 'root', 'star']);
  });

  it('compares segments percent-decoded, like the router: encoded paths cannot slip past a scope', () => {
    const index = new MiddlewareIndex(
      [binding('admin', { scope: '/admin' }), binding('enc', { scope: '/caf%C3%A9' }), binding('space', { scope: '/a b/*' })],
      false,
    );
    expect(select(index, '/%61dmin')).toEqual(['admin']);
    expect(select(index, '/%61%64%6D%69%6E/panel')).toEqual(['admin']);
    expect(select(index, '/adm%69n/')).toEqual(['admin']);
    expect(select(index, '/café')).toEqual(['enc']);
    expect(select(index, '/caf%c3%a9/x')).toEqual(['enc']);
    expect(select(index, '/a%20b/x')).toEqual(['space']);
    // `%2F` decodes to a `/` inside one segment: a different segment, as for the router.
    expect(select(index, '/admin%2Fpanel')).toEqual([]);
    expect(select(index, '/%41dmin')).toEqual([]);
  });

  it('keeps a segment that does not decode as is (the router answers it 400 anyway)', () => {
    const index = new MiddlewareIndex([binding('bad', { scope: '/%zz' }), binding('admin', { scope: '/admin' })], false);
    expect(select(index, '/%zz/x')).toEqual(['bad']);
    expect(select(index, '/admin/%zz')).toEqual(['admin']);
    expect(select(index, '/%E0%A4%A')).toEqual([]);
  });

  it('decodes parameter segments too: an encoded or non-empty segment matches :name, an empty one does not', () => {
    const index = new MiddlewareIndex([binding('p', { scope: '/:x/end' })], false);
    expect(select(index, '/%41/end')).toEqual(['p']);
    expect(select(index, '/%2F/end')).toEqual(['p']);
    expect(select(index, '//end')).toEqual([]);
  });

  it('with ignore_trailing_slash, a trailing slash is not "under" the prefix', () => {
    const strict = new MiddlewareIndex([binding('wild', { scope: '/a/*' }), binding('incl', { scope: '/a' })], false);
    const lenient = new MiddlewareIndex([binding('wild', { scope: '/a/*' }), binding('incl', { scope: '/a' })], true);
    expect(select(strict, '/a/')).toEqual(['wild', 'incl']);
    expect(select(lenient, '/a/')).toEqual(['incl']);
    expect(select(lenient, '/a///')).toEqual(['incl']);
    expect(select(lenient, '/a/b/')).toEqual(['wild', 'incl']);
    expect(select(lenient, '/a')).toEqual(['incl']);
  });

  it('collects static and parameter branches that both cover a path, once each', () => {
    const index = new MiddlewareIndex(
      [
        binding('static', { scope: '/users/me' }),
        binding('param', { scope: '/users/:id' }),
        binding('param-wild', { scope: '/users/:id/*' }),
        binding('users', { scope: '/users' }),
        binding('users-wild', { scope: '/users/*' }),
      ],
      false,
    );
    expect(select(index, '/users/me')).toEqual(['static', 'param', 'users', 'users-wild']);
    expect(select(index, '/users/me/x')).toEqual(['static', 'param', 'param-wild', 'users', 'users-wild']);
    expect(select(index, '/users/7')).toEqual(['param', 'users', 'users-wild']);
    expect(select(index, '/users')).toEqual(['users']);
  });

  it('returns one shared frozen empty array when nothing covers the path', () => {
    const empty = new MiddlewareIndex([], false);
    const scopedOnly = new MiddlewareIndex([binding('s', { scope: '/only' }), binding('r', { phase: 'onRequest' })], false);
    const results = [
      empty.select('preHandler', '/x'),
      empty.select('onError', '/'),
      scopedOnly.select('preHandler', '/elsewhere'),
      scopedOnly.select('preHandler', '/'),
      scopedOnly.select('onTimeout', '/only'),
      scopedOnly.select('postHandler', '/only/x'),
    ];
    for (const result of results) {
      expect(result).toEqual([]);
      expect(Object.isFrozen(result)).toBe(true);
      expect(result).toBe(results[0]);
    }
  });

  it('returns the same array for repeated global-only selections (no per-request allocation)', () => {
    const index = new MiddlewareIndex([binding('g1'), binding('g2', { priority: -1 })], false);
    const first = index.select('preHandler', '/a');
    expect(ids(first)).toEqual(['g2', 'g1']);
    expect(index.select('preHandler', '/b/c')).toBe(first);
  });
});

// ---- property: the trie agrees with a brute-force selector ----

const SEGMENTS = ['a', 'b', '%61', '%62', 'c', '', 'x y'] as const;
const SCOPE_SEGMENTS = ['a', 'b', '%61', ':p', ':q', 'c'] as const;

function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function trimTrailing(path: string): string {
  let end = path.length;
  while (end > 1 && path[end - 1] === '/') end--;
  return path.slice(0, end);
}

/** Brute force, straight from the rules: `P` covers P and P/…, `P/*` covers P/…, `:x` one non-empty segment. */
function covers(scope: string | undefined, path: string, ignoreTrailingSlash: boolean): boolean {
  if (scope === undefined || scope === '/' || scope === '/*') return true;
  const wildcard = scope.endsWith('/*');
  const base = trimTrailing(wildcard ? scope.slice(0, -2) : scope);
  const scopeSegments = base.slice(1).split('/');
  const pathSegments = (ignoreTrailingSlash ? trimTrailing(path) : path).slice(1).split('/');
  if (pathSegments.length < scopeSegments.length) return false;
  for (let i = 0; i < scopeSegments.length; i++) {
    const s = scopeSegments[i] as string;
    const p = decode(pathSegments[i] as string);
    if (s.startsWith(':') ? p.length === 0 : decode(s) !== p) return false;
  }
  return wildcard ? pathSegments.length > scopeSegments.length : true;
}

function referenceOrder(a: MiddlewareBinding, b: MiddlewareBinding): number {
  if (a.priority !== b.priority) return a.priority - b.priority;
  if (a.registeredAt !== b.registeredAt) return a.registeredAt - b.registeredAt;
  if (a.ownerId !== b.ownerId) return a.ownerId < b.ownerId ? -1 : 1;
  return a.seq - b.seq;
}

const scopeArb = fc.oneof(
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.constantFrom('/', '/*') },
  {
    weight: 6,
    arbitrary: fc
      .tuple(fc.array(fc.constantFrom(...SCOPE_SEGMENTS), { minLength: 1, maxLength: 3 }), fc.constantFrom('', '/*', '/'))
      .map(([segments, suffix]) => `/${segments.join('/')}${suffix}`),
  },
);
const specArb = fc.record({
  phase: fc.constantFrom<MiddlewarePhase>('onRequest', 'preHandler', 'onError'),
  scope: scopeArb,
  priority: fc.constantFrom(-1, 0, 0, 1, 2.5),
  registeredAt: fc.constantFrom(1, 2, 3),
  ownerId: fc.constantFrom('o1', 'o2'),
});
const pathArb = fc.array(fc.constantFrom(...SEGMENTS), { minLength: 1, maxLength: 5 }).map((segments) => `/${segments.join('/')}`);

describe('MiddlewareIndex: property', () => {
  it('selects exactly what a brute-force scan over every binding selects, in the same order', () => {
    fc.assert(
      fc.property(
        fc.array(specArb, { maxLength: 12 }),
        fc.array(pathArb, { minLength: 1, maxLength: 8 }),
        fc.boolean(),
        (specs, paths, ignoreTrailingSlash) => {
          // seq = index: every binding has a distinct registration key, so the order is total.
          const bindings = specs.map((spec, i) => {
            const b: MiddlewareBinding = { triggerId: `m${i}`, functionId: `f${i}`, ownerId: spec.ownerId, phase: spec.phase, priority: spec.priority, registeredAt: spec.registeredAt, seq: i };
            if (spec.scope !== undefined) b.scopePath = spec.scope;
            return b;
          });
          const index = new MiddlewareIndex(bindings, ignoreTrailingSlash);
          expect(ids(index.ordered)).toEqual(ids([...bindings].sort(referenceOrder)));
          for (const path of paths) {
            for (const phase of ['onRequest', 'preHandler', 'onError', 'onTimeout'] as const) {
              const expected = bindings
                .filter((b) => b.phase === phase && covers(b.scopePath, path, ignoreTrailingSlash))
                .sort(referenceOrder);
              expect({ path, phase, got: ids(index.select(phase, path)) }).toEqual({ path, phase, got: ids(expected) });
            }
          }
        },
      ),
      { numRuns: 400 },
    );
  });
});

describe('MiddlewareIndex: kept selections', () => {
  const bindings = () => [
    binding('api', { scope: '/api' }),
    binding('users', { scope: '/api/users/:id' }),
    binding('below', { scope: '/api/*', phase: 'onRequest' }),
    binding('all', { phase: 'postHandler' }),
  ];

  it('answers a path asked again, per phase, as the first time and as a fresh index does', () => {
    const index = new MiddlewareIndex(bindings(), false);
    const paths = ['/api', '/api/users/7', '/api/users/7/x', '/other', '/api/', '/api/users/%37'];
    for (let round = 0; round < 3; round++) {
      for (const path of paths) {
        for (const phase of PHASES) expect(select(index, path, phase), `${phase} ${path}`).toEqual(select(new MiddlewareIndex(bindings(), false), path, phase));
      }
    }
  });

  it('stays right past its bound of paths and for paths too long to keep', () => {
    const index = new MiddlewareIndex(bindings(), false);
    const long = `/api/${'x'.repeat(300)}`;
    for (let i = 0; i < 3000; i++) {
      expect(select(index, `/api/users/${i}`)).toEqual(['api', 'users']);
      expect(select(index, `/elsewhere/${i}`)).toEqual([]);
    }
    expect(select(index, long)).toEqual(['api']);
    expect(select(index, long, 'onRequest')).toEqual(['below']);
  });
});
