import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { resolveRequestId } from '../../src/http/request-id.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('resolveRequestId', () => {
  it('reuses a short printable ASCII id', () => {
    expect(resolveRequestId('abc-123')).toBe('abc-123');
    expect(resolveRequestId('a')).toBe('a');
    expect(resolveRequestId('x'.repeat(128))).toBe('x'.repeat(128));
    expect(resolveRequestId('!~{}"<>')).toBe('!~{}"<>');
  });

  it('uses the first value of a repeated header', () => {
    expect(resolveRequestId(['first', 'second'])).toBe('first');
  });

  it('generates a fresh uuid v4 when there is no usable id', () => {
    const rejected: (string | string[] | undefined)[] = [
      undefined,
      '',
      [],
      'x'.repeat(129),
      'has space',
      'tab\there',
      'line\nbreak',
      'cr\r',
      'nul\0',
      'del\x7f',
      'caf\u00e9',
      '日本',
      ['bad value', 'good'],
    ];
    for (const incoming of rejected) {
      const id = resolveRequestId(incoming);
      expect(id, JSON.stringify(incoming)).toMatch(UUID_V4);
    }
  });

  it('generates a different id each time', () => {
    expect(resolveRequestId(undefined)).not.toBe(resolveRequestId(undefined));
  });

  it('always returns an id that is safe in a header: echoed exactly when acceptable', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 140 }), (incoming) => {
        const id = resolveRequestId(incoming);
        expect(id).toMatch(/^[\x21-\x7e]{1,128}$/);
        const acceptable = incoming.length >= 1 && incoming.length <= 128 && /^[\x21-\x7e]+$/.test(incoming);
        if (acceptable) expect(id).toBe(incoming);
        else expect(id).toMatch(UUID_V4);
      }),
      { numRuns: 500 },
    );
  });
});
