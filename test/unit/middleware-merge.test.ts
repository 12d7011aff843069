import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { deepMerge, MAX_MERGE_DEPTH, MergeDepthError } from '../../src/middleware/merge.js';

// deepMerge (docs/middleware.md#patches): objects merge key by key, arrays and scalars replace,
// `__proto__` / `constructor` / `prototype` are dropped and counted at every depth, nesting beyond
// MAX_MERGE_DEPTH (32) levels throws MergeDepthError.

const FORBIDDEN = new Set(['__proto__', 'constructor', 'prototype']);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Parsed from text, so `__proto__` is an own key (an object literal would set the prototype instead). */
const parse = (text: string): Record<string, unknown> => JSON.parse(text) as Record<string, unknown>;

/** Reference: a pure merge written independently of the implementation. */
function refClean(value: unknown): { value: unknown; refused: number } {
  if (Array.isArray(value)) {
    let refused = 0;
    const items = value.map((item) => {
      const cleaned = refClean(item);
      refused += cleaned.refused;
      return cleaned.value;
    });
    return { value: items, refused };
  }
  if (!isObject(value)) return { value, refused: 0 };
  let refused = 0;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (FORBIDDEN.has(key)) {
      refused++;
      continue;
    }
    const cleaned = refClean(item);
    refused += cleaned.refused;
    out[key] = cleaned.value;
  }
  return { value: out, refused };
}

function refMerge(target: unknown, patch: Record<string, unknown>): { value: Record<string, unknown>; refused: number } {
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
  let refused = 0;
  for (const [key, incoming] of Object.entries(patch)) {
    if (FORBIDDEN.has(key)) {
      refused++;
      continue;
    }
    const current = out[key];
    if (isObject(incoming) && isObject(current)) {
      const merged = refMerge(current, incoming);
      refused += merged.refused;
      out[key] = merged.value;
    } else {
      const cleaned = refClean(incoming);
      refused += cleaned.refused;
      out[key] = cleaned.value;
    }
  }
  return { value: out, refused };
}

/** Every object inside `value` (including itself): no own forbidden key, a normal prototype. */
function walkObjects(value: unknown, visit: (obj: Record<string, unknown>) => void): void {
  if (Array.isArray(value)) {
    for (const item of value) walkObjects(item, visit);
    return;
  }
  if (!isObject(value)) return;
  visit(value);
  for (const key of Object.keys(value)) walkObjects(value[key], visit);
}

const prototypeSnapshot = () => ({
  object: Object.getOwnPropertyNames(Object.prototype).sort(),
  array: Object.getOwnPropertyNames(Array.prototype).sort(),
  fn: Object.getOwnPropertyNames(Function.prototype).sort(),
});

/** `{"k":{"k":…{"k":leaf}}}` with `levels` objects. */
const nested = (levels: number, leaf: string, key = 'k'): string => `${`{"${key}":`.repeat(levels - 1)}{"${key}":${leaf}}${'}'.repeat(levels - 1)}`;

describe('deepMerge: examples', () => {
  it('merges objects key by key and keeps untouched keys', () => {
    const target = { a: 1, user: { id: 7, name: 'ann', roles: { admin: false } }, keep: 'x' };
    const report = deepMerge(target, { user: { name: 'bob', roles: { admin: true, dev: true } }, b: 2 });
    expect(target).toStrictEqual({ a: 1, user: { id: 7, name: 'bob', roles: { admin: true, dev: true } }, keep: 'x', b: 2 });
    expect(report).toStrictEqual({ refusedKeys: 0 });
  });

  it('replaces arrays and scalars instead of merging them', () => {
    const target: Record<string, unknown> = { list: [1, 2, 3], n: 1, obj: { a: 1 }, s: 'x' };
    deepMerge(target, { list: [9], n: { now: 'object' }, obj: [1], s: null });
    expect(target).toStrictEqual({ list: [9], n: { now: 'object' }, obj: [1], s: null });
  });

  it('replaces an array with an object and an object with a scalar', () => {
    const target: Record<string, unknown> = { a: [1, { x: 1 }], b: { deep: { er: 1 } } };
    deepMerge(target, { a: { x: 2 }, b: 5 });
    expect(target).toStrictEqual({ a: { x: 2 }, b: 5 });
  });

  it('copies patch values: later changes to the patch do not reach the target', () => {
    const patch = { obj: { a: 1 }, list: [{ b: 1 }] };
    const target: Record<string, unknown> = {};
    deepMerge(target, patch);
    patch.obj.a = 99;
    (patch.list[0] as { b: number }).b = 99;
    expect(target).toStrictEqual({ obj: { a: 1 }, list: [{ b: 1 }] });
    expect(target.obj).not.toBe(patch.obj);
  });

  it('merges into null-prototype targets (headers, params) and keeps them null-prototype', () => {
    const headers = Object.create(null) as Record<string, unknown>;
    headers.host = 'h';
    const target: Record<string, unknown> = { headers };
    deepMerge(target, { headers: { 'x-user': 'ann' } });
    expect(target.headers).toBe(headers);
    expect(Object.getPrototypeOf(headers)).toBeNull();
    expect({ ...headers }).toStrictEqual({ host: 'h', 'x-user': 'ann' });
  });

  it('treats inherited keys of the target as absent (merges only into own objects)', () => {
    const target: Record<string, unknown> = {};
    deepMerge(target, parse('{"toString":{"a":1},"hasOwnProperty":"x"}'));
    expect(Object.keys(target)).toEqual(['toString', 'hasOwnProperty']);
    expect(Object.getOwnPropertyDescriptor(target, 'toString')?.value).toStrictEqual({ a: 1 });
    expect(Object.getOwnPropertyDescriptor(Object.prototype, 'hasOwnProperty')?.value).toBe(Object.hasOwnProperty);
  });

  it('drops and counts __proto__, constructor and prototype at every depth, inside arrays too', () => {
    const target: Record<string, unknown> = { keep: { a: 1 } };
    const patch = parse(
      '{"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}},' +
        '"keep":{"__proto__":{"polluted":"yes"},"b":2},' +
        '"fresh":{"prototype":1,"c":3,"inner":{"constructor":{"x":1}}},' +
        '"list":[{"__proto__":{"polluted":"yes"},"d":4},[{"prototype":{}}]]}',
    );
    const report = deepMerge(target, patch);
    expect(report.refusedKeys).toBe(7);
    expect(target).toStrictEqual({ keep: { a: 1, b: 2 }, fresh: { c: 3, inner: {} }, list: [{ d: 4 }, [{}]] });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(target.keep)).toBe(Object.prototype);
    expect(Object.getPrototypeOf((target.list as unknown[])[0])).toBe(Object.prototype);
  });

  it('refuses the keys when the target already holds them as own data too', () => {
    const target = parse('{"constructor":{"a":1}}');
    const report = deepMerge(target, parse('{"constructor":{"b":2}}'));
    expect(report.refusedKeys).toBe(1);
    // (toStrictEqual would read the own `constructor` key as the object's class.)
    expect(JSON.stringify(target)).toBe('{"constructor":{"a":1}}');
  });

  it(`accepts exactly ${MAX_MERGE_DEPTH} levels of nesting and throws MergeDepthError beyond`, () => {
    expect(MAX_MERGE_DEPTH).toBe(32);
    // Depth is JSON nesting depth: containers count, scalars do not.
    for (const [leaf, containers] of [['1', 0], ['"s"', 0], ['null', 0], ['{}', 1], ['[]', 1], ['{"x":[]}', 2]] as const) {
      const levels = 32 - containers;
      const ok: Record<string, unknown> = {};
      expect(() => deepMerge(ok, parse(nested(levels, leaf))), `32 levels, leaf ${leaf}`).not.toThrow();
      let probe: unknown = ok;
      for (let i = 0; i < levels; i++) probe = (probe as Record<string, unknown>).k;
      expect(probe).toStrictEqual(JSON.parse(leaf));

      expect(() => deepMerge({}, parse(nested(levels + 1, leaf))), `33 levels, leaf ${leaf}`).toThrow(MergeDepthError);
    }
  });

  it('counts depth through arrays and through objects merged into the target', () => {
    const arrays = `{"k":${'['.repeat(31)}${']'.repeat(31)}}`;
    expect(() => deepMerge({}, parse(arrays))).not.toThrow();
    expect(() => deepMerge({}, parse(`{"k":${'['.repeat(32)}${']'.repeat(32)}}`))).toThrow(MergeDepthError);

    // The same 33-level patch throws whether it merges into existing objects or creates new ones.
    const existing = parse(nested(33, '{}'));
    expect(() => deepMerge(existing, parse(nested(33, '1')))).toThrow(MergeDepthError);
    const existing32 = parse(nested(32, '{}'));
    expect(() => deepMerge(existing32, parse(nested(32, '1')))).not.toThrow();
  });

  it('gives MergeDepthError a stable code and message', () => {
    try {
      deepMerge({}, parse(nested(40, '1')));
      expect.unreachable('should have thrown');
    } catch (err) {
      expect(err).toBeInstanceOf(MergeDepthError);
      expect(err).toBeInstanceOf(Error);
      expect((err as MergeDepthError).code).toBe('MERGE_TOO_DEEP');
      expect((err as Error).message).toBe('patch nested deeper than 32');
    }
  });
});

// ---- property-based ----

const keyArb = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('__proto__', 'constructor', 'prototype') },
  { weight: 3, arbitrary: fc.constantFrom('a', 'b', 'polluted', 'toString', 'valueOf', 'hasOwnProperty', 'length') },
  { weight: 1, arbitrary: fc.string({ maxLength: 3 }) },
);
const leafText = fc.oneof(
  fc.constant('null'),
  fc.boolean().map(String),
  fc.integer().map(String),
  fc.string({ maxLength: 5 }).map((s) => JSON.stringify(s)),
  fc.constant('{"polluted":"yes"}'),
);
/** JSON text (not values), so that forbidden keys survive as own keys after JSON.parse. */
const jsonText = fc.letrec<{ value: string; array: string; object: string }>((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leafText, tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 3 }).map((items) => `[${items.join(',')}]`),
  object: fc
    .array(fc.tuple(keyArb, tie('value')), { maxLength: 4 })
    .map((entries) => `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`),
})).object;

/** A forbidden key buried at a random depth (1..31) under ordinary keys. */
const buriedForbidden = fc
  .tuple(fc.array(fc.constantFrom('a', 'b', 'c'), { minLength: 0, maxLength: 30 }), fc.constantFrom('__proto__', 'constructor', 'prototype'))
  .map(([path, bad]) => {
    let text = `{${JSON.stringify(bad)}:{"polluted":"yes","prototype":{"polluted":"yes"}}}`;
    for (const key of [...path].reverse()) text = `{${JSON.stringify(key)}:${text}}`;
    return text;
  });

describe('deepMerge: properties', () => {
  it('equals the reference merge and counts the same refused keys', () => {
    fc.assert(
      fc.property(jsonText, jsonText, (targetText, patchText) => {
        // The engine's targets never carry forbidden keys (it builds them); patches may.
        const target = refClean(parse(targetText)).value as Record<string, unknown>;
        const expected = refMerge(target, parse(patchText));
        const report = deepMerge(target, parse(patchText));
        expect(target).toStrictEqual(expected.value);
        expect(report.refusedKeys).toBe(expected.refused);
      }),
      { numRuns: 500 },
    );
  });

  it('never pollutes a prototype and leaves no forbidden own key anywhere', () => {
    const before = prototypeSnapshot();
    fc.assert(
      fc.property(jsonText, fc.oneof(jsonText, buriedForbidden), (targetText, patchText) => {
        const target = refClean(parse(targetText)).value as Record<string, unknown>;
        deepMerge(target, parse(patchText));
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
        expect(([] as unknown as Record<string, unknown>).polluted).toBeUndefined();
        expect(prototypeSnapshot()).toStrictEqual(before);
        walkObjects(target, (obj) => {
          expect(Object.getPrototypeOf(obj)).toBe(Object.prototype);
          for (const key of FORBIDDEN) expect(Object.hasOwn(obj, key)).toBe(false);
        });
      }),
      { numRuns: 500 },
    );
  });

  it('refuses a buried forbidden key exactly once, whatever its depth', () => {
    fc.assert(
      fc.property(buriedForbidden, (patchText) => {
        const target: Record<string, unknown> = {};
        expect(deepMerge(target, parse(patchText)).refusedKeys).toBe(1);
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      }),
    );
  });

  it('replaces arrays wholesale', () => {
    fc.assert(
      fc.property(fc.array(fc.jsonValue()), fc.array(fc.jsonValue()), (old, next) => {
        const target: Record<string, unknown> = { list: old };
        const patchList = JSON.parse(JSON.stringify({ list: next })) as { list: unknown[] };
        deepMerge(target, patchList);
        expect(target.list).toStrictEqual(refClean(patchList.list).value);
        expect((target.list as unknown[]).length).toBe(next.length);
        expect(target.list).not.toBe(patchList.list);
      }),
    );
  });

  it('throws MergeDepthError exactly when the patch nests deeper than 32 levels', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 45 }), fc.constantFrom('1', '{}', '"x"', '[]'), fc.boolean(), (levels, leaf, intoExisting) => {
        const target = intoExisting ? parse(nested(levels, '{}')) : {};
        const run = () => deepMerge(target, parse(nested(levels, leaf)));
        const depth = levels + (leaf === '{}' || leaf === '[]' ? 1 : 0);
        if (depth > MAX_MERGE_DEPTH) expect(run).toThrow(MergeDepthError);
        else expect(run).not.toThrow();
      }),
    );
  });
});
