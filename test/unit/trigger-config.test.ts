import { describe, expect, it } from 'vitest';
import { parsePathPattern } from '../../src/routing/path-pattern.js';
import type { TriggerValidation } from '../../src/routing/trigger-config.js';
import { MIDDLEWARE_PHASES, validateTrigger } from '../../src/routing/trigger-config.js';

const invalid = (message: string): TriggerValidation => ({ ok: false, code: 'invalid_trigger_config', message });

function pattern(source: string, ignoreTrailingSlash = false) {
  const parsed = parsePathPattern(source, ignoreTrailingSlash);
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.pattern;
}

describe('validateTrigger: http', () => {
  const http = (config: Record<string, unknown>, ignoreTrailingSlash = false): TriggerValidation =>
    validateTrigger('http', config, ignoreTrailingSlash);

  it('accepts the minimal config: no optional keys in the spec', () => {
    expect(http({ api_path: '/users/:id', http_method: 'GET' })).toStrictEqual({
      ok: true,
      spec: { type: 'http', http: { apiPath: '/users/:id', pattern: pattern('/users/:id'), httpMethod: 'GET', routeKey: 'GET /users/:' } },
    });
  });

  it('accepts the SDK frame config with condition and per-route middleware', () => {
    expect(
      http({
        api_path: '/users/:id',
        http_method: 'GET',
        condition_function_id: 'api::allowed',
        middleware_function_ids: ['mw::auth', 'mw::log'],
        unknown_key: true,
      }),
    ).toStrictEqual({
      ok: true,
      spec: {
        type: 'http',
        http: {
          apiPath: '/users/:id',
          pattern: pattern('/users/:id'),
          httpMethod: 'GET',
          routeKey: 'GET /users/:',
          conditionFunctionId: 'api::allowed',
          middlewareFunctionIds: ['mw::auth', 'mw::log'],
        },
      },
    });
  });

  it('upper-cases the method and accepts any token method', () => {
    for (const [given, stored] of [
      ['get', 'GET'],
      ['Post', 'POST'],
      ['PURGE', 'PURGE'],
      ['m-search', 'M-SEARCH'],
    ]) {
      const result = http({ api_path: '/a', http_method: given });
      expect(result.ok && result.spec.type === 'http' ? result.spec.http.httpMethod : result).toBe(stored);
    }
  });

  it('treats a null condition and null middleware list as unset', () => {
    const result = http({ api_path: '/a', http_method: 'GET', condition_function_id: null, middleware_function_ids: null });
    expect(result).toStrictEqual({
      ok: true,
      spec: { type: 'http', http: { apiPath: '/a', pattern: pattern('/a'), httpMethod: 'GET', routeKey: 'GET /a' } },
    });
  });

  it('keeps an empty middleware list', () => {
    const result = http({ api_path: '/a', http_method: 'GET', middleware_function_ids: [] });
    expect(result.ok && result.spec.type === 'http' ? result.spec.http.middlewareFunctionIds : result).toEqual([]);
  });

  it('parses the pattern with the trailing-slash mode', () => {
    const strict = http({ api_path: '/a/', http_method: 'GET' }, false);
    const loose = http({ api_path: '/a/', http_method: 'GET' }, true);
    expect(strict.ok && strict.spec.type === 'http' ? strict.spec.http.pattern.shapeKey : strict).toBe('/a/');
    expect(loose.ok && loose.spec.type === 'http' ? loose.spec.http.pattern.shapeKey : loose).toBe('/a');
    expect(loose.ok && loose.spec.type === 'http' ? loose.spec.http.apiPath : loose).toBe('/a/');
  });

  it('rejects a missing or empty api_path', () => {
    for (const apiPath of [undefined, '', 5, null, ['/a']]) {
      expect(http({ api_path: apiPath, http_method: 'GET' })).toStrictEqual(invalid('http trigger needs config.api_path'));
    }
  });

  it('rejects an api_path the pattern parser refuses, with its message', () => {
    expect(http({ api_path: '/a/:1', http_method: 'GET' })).toStrictEqual(
      invalid('invalid parameter segment ":1" in api_path'),
    );
    expect(http({ api_path: '/a/:id/:id', http_method: 'GET' })).toStrictEqual(
      invalid('duplicate parameter "id" in api_path'),
    );
    expect(http({ api_path: '/a?x', http_method: 'GET' })).toStrictEqual(invalid('api_path must not contain "?" or "#"'));
  });

  it('rejects a missing, empty or non-token http_method', () => {
    for (const method of ['', 1]) {
      expect(http({ api_path: '/a', http_method: method })).toStrictEqual(invalid('http trigger needs config.http_method'));
    }
    expect(http({ api_path: '/a', http_method: 'GE T' })).toStrictEqual(
      invalid('http_method "GE T" is not a valid HTTP method'),
    );
    expect(http({ api_path: '/a', http_method: 'GET\r\n' })).toStrictEqual(
      invalid('http_method "GET\r\n" is not a valid HTTP method'),
    );
    expect(http({ api_path: '/a', http_method: 'GET/1' })).toStrictEqual(
      invalid('http_method "GET/1" is not a valid HTTP method'),
    );
  });

  it('serves GET when http_method is absent or null, as iii does', () => {
    for (const config of [{ api_path: '/a' }, { api_path: '/a', http_method: null }]) {
      const result = http(config);
      expect(result.ok && result.spec.type === 'http' && result.spec.http.httpMethod).toBe('GET');
    }
  });

  it('keeps api_path as registered and matches it with its leading slash, as iii reads it', () => {
    const result = http({ api_path: 'users/:id', http_method: 'GET' });
    expect(result.ok && result.spec.type === 'http' && [result.spec.http.apiPath, result.spec.http.pattern.source]).toEqual(['users/:id', '/users/:id']);
  });

  it('checks api_path before http_method', () => {
    expect(http({})).toStrictEqual(invalid('http trigger needs config.api_path'));
  });

  it('rejects an empty or non-string condition_function_id', () => {
    for (const condition of ['', 5, {}, ['a']]) {
      expect(http({ api_path: '/a', http_method: 'GET', condition_function_id: condition })).toStrictEqual(
        invalid('condition_function_id must be a non-empty string'),
      );
    }
  });

  it('rejects middleware_function_ids that are not an array of non-empty strings', () => {
    for (const ids of ['mw::a', ['mw::a', ''], ['mw::a', 1], [null], { 0: 'mw::a' }]) {
      expect(http({ api_path: '/a', http_method: 'GET', middleware_function_ids: ids })).toStrictEqual(
        invalid('middleware_function_ids must be an array of non-empty strings'),
      );
    }
  });
});

describe('validateTrigger: http_middleware', () => {
  const mw = (config: Record<string, unknown>, ignoreTrailingSlash = false): TriggerValidation =>
    validateTrigger('http_middleware', config, ignoreTrailingSlash);

  const phaseMessage =
    'http_middleware config.phase must be one of onRequest, preHandler, postHandler, onResponse, onError, onTimeout';

  it('lists the six phases in lifecycle order', () => {
    expect(MIDDLEWARE_PHASES).toEqual(['onRequest', 'preHandler', 'postHandler', 'onResponse', 'onError', 'onTimeout']);
  });

  it('accepts every phase; priority defaults to 0 and scope is absent', () => {
    for (const phase of MIDDLEWARE_PHASES) {
      expect(mw({ phase })).toStrictEqual({
        ok: true,
        spec: { type: 'http_middleware', middleware: { phase, priority: 0 } },
      });
    }
  });

  it('accepts the documented example', () => {
    expect(mw({ phase: 'preHandler', scope: { path: '/api/*' }, priority: 10 })).toStrictEqual({
      ok: true,
      spec: { type: 'http_middleware', middleware: { phase: 'preHandler', scopePath: '/api/*', priority: 10 } },
    });
  });

  it('accepts negative, fractional and null priorities', () => {
    const priorityOf = (priority: unknown): unknown => {
      const result = mw({ phase: 'onRequest', priority });
      return result.ok && result.spec.type === 'http_middleware' ? result.spec.middleware.priority : result;
    };
    expect(priorityOf(-5)).toBe(-5);
    expect(priorityOf(1.5)).toBe(1.5);
    expect(priorityOf(0)).toBe(0);
    expect(priorityOf(null)).toBe(0);
  });

  it('rejects a missing, unknown or wrongly cased phase', () => {
    for (const phase of [undefined, '', 'onrequest', 'before', 1, null]) {
      expect(mw({ phase })).toStrictEqual(invalid(phaseMessage));
    }
  });

  it('rejects a non-finite or non-number priority', () => {
    for (const priority of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, '10', true, {}]) {
      expect(mw({ phase: 'onRequest', priority })).toStrictEqual(
        invalid('http_middleware config.priority must be a finite number'),
      );
    }
  });

  it('accepts scope paths: plain prefix, /*, params, root wildcard', () => {
    for (const path of ['/api', '/api/*', '/users/:id', '/users/:id/*', '/*', '/']) {
      expect(mw({ phase: 'preHandler', scope: { path } })).toStrictEqual({
        ok: true,
        spec: { type: 'http_middleware', middleware: { phase: 'preHandler', scopePath: path, priority: 0 } },
      });
    }
  });

  it('treats a null scope as every request', () => {
    expect(mw({ phase: 'onRequest', scope: null })).toStrictEqual({
      ok: true,
      spec: { type: 'http_middleware', middleware: { phase: 'onRequest', priority: 0 } },
    });
  });

  it('rejects a scope that is not an object with a string path', () => {
    const message = invalid('http_middleware config.scope must be an object with a string "path"');
    for (const scope of ['/api', {}, { path: 5 }, { path: null }, [{ path: '/api' }]]) {
      expect(mw({ phase: 'onRequest', scope })).toStrictEqual(message);
    }
  });

  it('rejects a scope path the pattern parser refuses, naming scope.path', () => {
    expect(mw({ phase: 'onRequest', scope: { path: 'api/*' } })).toStrictEqual(
      invalid('http_middleware scope.path: api_path must be a string starting with "/"'),
    );
    expect(mw({ phase: 'onRequest', scope: { path: '/a/:1/*' } })).toStrictEqual(
      invalid('http_middleware scope.path: invalid parameter segment ":1" in api_path'),
    );
    expect(mw({ phase: 'onRequest', scope: { path: '/a b' } })).toStrictEqual(
      invalid('http_middleware scope.path: api_path must not contain whitespace'),
    );
  });

  it('checks phase first', () => {
    expect(mw({ priority: 'x', scope: 'y' })).toStrictEqual(invalid(phaseMessage));
  });
});

describe('validateTrigger: unknown trigger types', () => {
  it('answers trigger_type_not_found', () => {
    for (const type of ['cron', 'queue', 'HTTP', 'Http_Middleware', '']) {
      expect(validateTrigger(type, { api_path: '/a', http_method: 'GET' }, false)).toStrictEqual({
        ok: false,
        code: 'trigger_type_not_found',
        message: `trigger type "${type}" is not supported`,
      });
    }
  });
});

describe('parsePathPattern: patterns parsed lately are shared', () => {
  it('gives the same frozen pattern for the same source and mode, and parses each mode apart', () => {
    const first = parsePathPattern('/shared/:id/', false);
    const again = parsePathPattern('/shared/:id/', false);
    const slashless = parsePathPattern('/shared/:id/', true);
    if (!first.ok || !again.ok || !slashless.ok) throw new Error('not parsed');
    expect(again.pattern).toBe(first.pattern);
    expect(Object.isFrozen(first.pattern) && Object.isFrozen(first.pattern.segments)).toBe(true);
    // ignore_trailing_slash changes the segments: never the other mode's result.
    expect(first.pattern.segments).toHaveLength(3);
    expect(slashless.pattern.segments).toHaveLength(2);
    // A refusal is the same refusal.
    expect(parsePathPattern('/bad?x', false)).toEqual(parsePathPattern('/bad?x', false));
  });

  it('is bounded: a source not asked for since hundreds of others were is parsed anew', () => {
    const first = parsePathPattern('/bounded/first', false);
    for (let i = 0; i < 600; i++) parsePathPattern(`/bounded/${i}`, false);
    const later = parsePathPattern('/bounded/first', false);
    if (!first.ok || !later.ok) throw new Error('not parsed');
    expect(later.pattern).not.toBe(first.pattern);
    expect(later.pattern).toEqual(first.pattern);
  });
});
