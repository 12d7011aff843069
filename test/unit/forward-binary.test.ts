import { describe, expect, it } from 'vitest';
import { BINARY_KIND, MAX_CALL_CHANNELS, encodeBinaryCall, encodeBinaryResult } from '../../src/forwarding/forward-binary.js';
import { FrameDecoder, FrameError } from '../../src/forwarding/forward-frames.js';
import type { CallMessage } from '../../src/forwarding/forward-messages.js';
import { decodeClientMessage, decodeServerMessage, encodeCall } from '../../src/forwarding/forward-messages.js';
import { RawJson } from '../../src/invocation/raw-json.js';

const MAX = 64 * 1024 * 1024;
const body = (frame: Buffer): Buffer => frame.subarray(4);

function refused(fn: () => unknown, code: 'FORWARD_FRAME_MALFORMED' | 'FORWARD_FRAME_TOO_LARGE' = 'FORWARD_FRAME_MALFORMED'): void {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(FrameError);
  expect((thrown as FrameError).code).toBe(code);
}

type Call = Omit<CallMessage, 'kind'>;
const base: Call = { id: 1, functionId: 'api::get', data: { a: 1 }, remainingMs: 1000, requestId: undefined, isVoid: false };

/** What the msgpack form of the same call decodes to: both forms must say the same. */
const viaMsgpack = (call: Call): unknown => decodeClientMessage(body(encodeCall(call, MAX)));

describe('forward binary forms', () => {
  it('decode to what the msgpack forms decode to, for every combination of optional fields', () => {
    const optional: Partial<Call>[] = [
      {},
      { requestId: 'req-1' },
      { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', baggage: 'k=v,b=ü' },
      { metadata: { tags: ['todo'], 'é': null } },
      { channels: ['c-1', 'c-2'] },
      { isVoid: true, id: 0, remainingMs: 0 },
      { requestId: 'r', traceparent: 't', baggage: '', metadata: 0, channels: ['x'] },
    ];
    for (const extra of optional) {
      const call = { ...base, ...extra };
      const frame = encodeBinaryCall(call, MAX);
      expect(frame.readUInt32BE(0)).toBe(frame.length - 4);
      expect(frame[4]).toBe(BINARY_KIND.call);
      expect(decodeClientMessage(body(frame))).toEqual(viaMsgpack(call));
    }
  });

  it('carry any text exactly: non-ASCII, astral and escaped characters, JSON text as it was written', () => {
    const data = { s: 'héllo ✓ 𝄞 "quoted" \\ \n', lone: '\ud800', proto: JSON.parse('{"__proto__":1}') as unknown };
    const call = { ...base, data, functionId: 'fn::ü', requestId: 'ид' };
    const decoded = decodeClientMessage(body(encodeBinaryCall(call, MAX))) as CallMessage;
    expect(decoded.functionId).toBe('fn::ü');
    expect(decoded.requestId).toBe('ид');
    expect(decoded.data).toEqual(new RawJson(JSON.stringify(data)));
    // RawJson data goes as its text, unparsed.
    const spliced = decodeClientMessage(body(encodeBinaryCall({ ...base, data: new RawJson('{"k": [1, 2]}') }, MAX))) as CallMessage;
    expect(spliced.data).toEqual(new RawJson('{"k": [1, 2]}'));
  });

  it('size a large call by its bytes (not three times its text) and round-trip it', () => {
    for (const unit of ['a', 'é', '✓']) {
      const text = unit.repeat(100_000);
      const frame = encodeBinaryCall({ ...base, data: text, metadata: { m: text } }, MAX);
      // Its own buffer: the data and metadata measured, the short fields at their worst case.
      expect(frame.buffer.byteLength).toBeGreaterThanOrEqual(frame.length);
      expect(frame.buffer.byteLength).toBeLessThan(frame.length + 64);
      const decoded = decodeClientMessage(body(frame)) as CallMessage;
      expect(decoded.data).toEqual(new RawJson(JSON.stringify(text)));
      expect(decoded.metadata).toEqual(new RawJson(JSON.stringify({ m: text })));
    }
  });

  it('hand out frames that stay as written while later ones fill the shared buffer and the next', () => {
    const frames = Array.from({ length: 3000 }, (_, i) => encodeBinaryCall({ ...base, id: i + 1, data: { i, pad: 'p'.repeat(i % 700) } }, MAX));
    // All of them, read back after the last was written, through one stream decoder.
    const decoder = new FrameDecoder(MAX);
    const seen: CallMessage[] = [];
    decoder.push(Buffer.concat(frames), (frameBody) => seen.push(decodeClientMessage(frameBody) as CallMessage));
    expect(seen.map((call) => call.id)).toEqual(frames.map((_, i) => i + 1));
    seen.forEach((call, i) => expect(call.data).toEqual(new RawJson(JSON.stringify({ i, pad: 'p'.repeat(i % 700) }))));
  });

  it('send only the channel ids a reader keeps, and keep only well-formed ones', () => {
    const many = Array.from({ length: 40 }, (_, i) => `ch-${i}`);
    const decoded = decodeClientMessage(body(encodeBinaryCall({ ...base, channels: many }, MAX))) as CallMessage;
    expect(decoded.channels).toEqual(many.slice(0, MAX_CALL_CHANNELS));
    expect(decoded).toEqual(viaMsgpack({ ...base, channels: many }));
    const odd = ['', 'x'.repeat(65), 'ok'];
    expect((decodeClientMessage(body(encodeBinaryCall({ ...base, channels: odd }, MAX))) as CallMessage).channels).toEqual(['ok']);
    expect(decodeClientMessage(body(encodeBinaryCall({ ...base, channels: ['', 'x'.repeat(65)] }, MAX)))).not.toHaveProperty('channels');
    expect(decodeClientMessage(body(encodeBinaryCall({ ...base, channels: [] }, MAX)))).not.toHaveProperty('channels');
  });

  it('carry a value result, and no value, as the msgpack form does', () => {
    for (const value of [null, 0, 'x', { b: [2, 'é'] }, undefined]) {
      const frame = encodeBinaryResult(9, value, MAX);
      expect(frame[4]).toBe(BINARY_KIND.result);
      expect(decodeServerMessage(body(frame))).toEqual({ kind: 'result', id: 9, outcome: { ok: true, value } });
    }
    const big = 'v'.repeat(50_000);
    expect(decodeServerMessage(body(encodeBinaryResult(2, new RawJson(JSON.stringify(big)), MAX)))).toEqual({ kind: 'result', id: 2, outcome: { ok: true, value: big } });
  });

  it('ignore bytes after the last field (a later build may append some)', () => {
    const call = body(encodeBinaryCall({ ...base, requestId: 'r' }, MAX));
    expect(decodeClientMessage(Buffer.concat([call, Buffer.from([1, 2, 3])]))).toEqual(decodeClientMessage(call));
    const result = body(encodeBinaryResult(3, 'x', MAX));
    expect(decodeServerMessage(Buffer.concat([result, Buffer.from('more')]))).toEqual(decodeServerMessage(result));
  });

  it('refuse a body cut short, a length past its end, an empty function id, a value that is not JSON', () => {
    const call = body(encodeBinaryCall({ ...base, requestId: 'req', traceparent: 't', channels: ['c'] }, MAX));
    for (let cut = 1; cut < call.length; cut++) refused(() => decodeClientMessage(call.subarray(0, cut)));
    const result = body(encodeBinaryResult(3, { v: 1 }, MAX));
    for (let cut = 1; cut < result.length; cut++) refused(() => decodeServerMessage(result.subarray(0, cut)));
    // Field lengths that do not cut the text exactly: longer, shorter, past its end.
    for (const functionIdLength of [0xffffffff, 'api::get'.length + 1, 'api::get'.length - 1]) {
      const wrong = Buffer.from(call);
      wrong.writeUInt32BE(functionIdLength, 11);
      refused(() => decodeClientMessage(wrong));
    }
    // Bytes that are not UTF-8 decode to replacement characters, and no longer add up.
    const garbled = Buffer.from(body(encodeBinaryCall({ ...base, functionId: 'é' }, MAX)));
    garbled[garbled.indexOf(Buffer.from('é'))] = 0xff;
    refused(() => decodeClientMessage(garbled));
    refused(() => decodeClientMessage(body(encodeBinaryCall({ ...base, functionId: '' }, MAX))));
    const notJson = Buffer.concat([Buffer.from([BINARY_KIND.result, 0, 0, 0, 1, 1, 0, 0, 0, 4]), Buffer.from('{no}')]);
    refused(() => decodeServerMessage(notJson));
    // A call kind where a result is expected and the other way round: neither decoder takes the other's.
    refused(() => decodeServerMessage(call));
    refused(() => decodeClientMessage(result));
  });

  it('refuse to write a frame over the limit', () => {
    refused(() => encodeBinaryCall({ ...base, data: 'x'.repeat(2000) }, 1000), 'FORWARD_FRAME_TOO_LARGE');
    refused(() => encodeBinaryResult(1, 'x'.repeat(2000), 1000), 'FORWARD_FRAME_TOO_LARGE');
    // The limit is on the body, as for msgpack frames.
    const frame = encodeBinaryResult(1, 'x', MAX);
    expect(() => encodeBinaryResult(1, 'x', frame.length - 4)).not.toThrow();
    refused(() => encodeBinaryResult(1, 'x', frame.length - 5), 'FORWARD_FRAME_TOO_LARGE');
  });
});
