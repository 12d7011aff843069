import { describe, expect, it } from 'vitest';
import { dataRecord, inheritsNothing } from '../../src/values.js';

describe('dataRecord', () => {
  it('inherits nothing: every Object.prototype name is absent until set, and then plain data', () => {
    const record = dataRecord();
    for (const name of Object.getOwnPropertyNames(Object.prototype)) expect(name in record, name).toBe(false);
    expect(record['constructor']).toBeUndefined();
    record['__proto__'] = 'x';
    record['constructor'] = 'y';
    record['toString'] = 'z';
    expect(Object.keys(record)).toEqual(['__proto__', 'constructor', 'toString']);
    expect(Object.getOwnPropertyDescriptor(record, '__proto__')?.value).toBe('x');
    expect(JSON.stringify(record)).toBe('{"__proto__":"x","constructor":"y","toString":"z"}');
    expect(inheritsNothing(record)).toBe(true);
  });

  it('shares one prototype that cannot be changed, so no record can be polluted through another', () => {
    const one = dataRecord();
    const proto = Object.getPrototypeOf(one) as Record<string, unknown>;
    expect(Object.getPrototypeOf(dataRecord())).toBe(proto);
    expect(Object.isFrozen(proto)).toBe(true);
    expect(Object.getPrototypeOf(proto)).toBeNull();
    expect(Reflect.set(proto, 'polluted', 1)).toBe(false);
    expect('polluted' in dataRecord()).toBe(false);
  });

  it('tells objects that inherit nothing from plain ones', () => {
    expect(inheritsNothing(Object.create(null) as object)).toBe(true);
    expect(inheritsNothing({})).toBe(false);
    expect(inheritsNothing(JSON.parse('{"__proto__":{}}') as object)).toBe(false);
  });
});
