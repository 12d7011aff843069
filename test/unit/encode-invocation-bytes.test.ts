import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RawJson } from '../../src/invocation/raw-json.js';
import { encodeInvocation, encodeInvocationBytes } from '../../src/protocol/encode.js';

/** Any string, lone surrogates included (Buffer.from and the frame's encoding both make them U+FFFD). */
const anyText = fc.string({ unit: fc.oneof(fc.constant('\ud800'), fc.constant('\udfff'), fc.constantFrom('"', '\\', '\n', 'é', '☃', '😀'), fc.string({ maxLength: 1 })) });

describe('encodeInvocationBytes', () => {
  it('is byte for byte the UTF-8 of encodeInvocation with the same data as text', () => {
    fc.assert(
      fc.property(
        fc.tuple(anyText, anyText, fc.jsonValue(), anyText, anyText),
        fc.option(fc.constant('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'), { nil: undefined }),
        fc.option(anyText, { nil: undefined }),
        fc.option(fc.jsonValue().map((v) => JSON.stringify(v)), { nil: undefined }),
        ([invocationId, functionId, body, head, tail], traceparent, baggage, metadataJson) => {
          const bytes = Buffer.from(JSON.stringify(body));
          const data = RawJson.spliced(`{"h":${JSON.stringify(head)},"body":`, bytes, `,"t":${JSON.stringify(tail)}}`);
          const parts = data.parts;
          if (parts === undefined) throw new Error('spliced data has parts');
          const text = encodeInvocation(invocationId, functionId, data.json, traceparent, baggage, metadataJson);
          expect(encodeInvocationBytes(invocationId, functionId, parts, traceparent, baggage, metadataJson).equals(Buffer.from(text))).toBe(true);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("spliced data reads as the text of its parts, for whoever needs text (forwarding, HTTP functions)", () => {
    const data = RawJson.spliced('{"a":', Buffer.from('{"z":"Zoë ☃"}'), '}');
    expect(data.json).toBe('{"a":{"z":"Zoë ☃"}}');
    expect(data.json).toBe(data.json);
    expect(new RawJson('[1]').parts).toBeUndefined();
    expect(new RawJson('[1]').json).toBe('[1]');
  });
});
