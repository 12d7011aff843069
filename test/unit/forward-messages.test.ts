import { RawJson } from '../../src/invocation/raw-json.js';
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { FrameError } from '../../src/forwarding/forward-frames.js';
import {
  FORWARD_PROTOCOL_VERSION,
  HELLO_FEATURES,
  RESULT_FRAME_MIN_BYTES,
  decodeClientMessage,
  decodeServerMessage,
  encodeCall,
  encodeHello,
  encodeHelloOk,
  encodeReject,
  encodeResult, proofHolds, resultFormsFor } from '../../src/forwarding/forward-messages.js';
import type { HelloMessage } from '../../src/forwarding/forward-messages.js';
import type { InvocationOutcome } from '../../src/invocation/invoker.js';

const MAX = 1024 * 1024;
/** What a client of the previous build reads (result frames, no binary forms), and every answer as a frame. */
const FRAMES = resultFormsFor(HELLO_FEATURES.resultFrame);
const ALL_FRAMES = { framesFrom: 0, binary: false };
const body = (frame: Buffer): Buffer => frame.subarray(4);
const packr = new Packr({ useRecords: false });
const raw = (value: unknown): Buffer => packr.pack(value);

function malformed(fn: () => unknown): void {
  expect(fn).toThrow(FrameError);
  try {
    fn();
  } catch (err) {
    expect((err as FrameError).code).toBe('FORWARD_FRAME_MALFORMED');
  }
}

describe('forward messages', () => {
  it('round-trips the handshake', () => {
    const hello = { version: FORWARD_PROTOCOL_VERSION, cluster: 'prod', secret: 's3cret', peerId: 'node-a/1/123' };
    const decoded = decodeClientMessage(body(encodeHello(hello)));
    expect(decoded).toMatchObject({ kind: 'hello', version: FORWARD_PROTOCOL_VERSION, cluster: 'prod', peerId: 'node-a/1/123' });
    // The secret stays home: the hello carries a proof of it, over a fresh nonce and the clock.
    expect(decoded).not.toHaveProperty('secret');
    expect(proofHolds('s3cret', decoded as HelloMessage)).toBe(true);
    expect(proofHolds('guess', decoded as HelloMessage)).toBe(false);
    const again = decodeClientMessage(body(encodeHello(hello))) as HelloMessage;
    expect(again.nonce).not.toBe((decoded as HelloMessage).nonce);
    expect(decodeServerMessage(body(encodeHelloOk()))).toEqual({ kind: 'helloOk', version: FORWARD_PROTOCOL_VERSION, features: HELLO_FEATURES.binary });
    expect(decodeServerMessage(body(encodeReject('wrong cluster secret')))).toEqual({ kind: 'reject', reason: 'wrong cluster secret' });
  });

  it('round-trips a call, with and without a request id', () => {
    const call = { id: 7, functionId: 'api::get', data: { a: [1, 'x', null] }, remainingMs: 1500, requestId: 'req-1', isVoid: false };
    // Data arrives as JSON text, to be spliced into the worker frame unchanged.
    const asJson = { ...call, data: new RawJson('{"a":[1,"x",null]}') };
    expect(decodeClientMessage(body(encodeCall(call, MAX)))).toEqual({ kind: 'call', ...asJson });
    const fire = { ...call, id: 0, requestId: undefined, isVoid: true };
    expect(decodeClientMessage(body(encodeCall(fire, MAX)))).toEqual({ kind: 'call', ...asJson, id: 0, requestId: undefined, isVoid: true });
  });

  it('carries an invocation\'s metadata as JSON text, on calls and void calls (iii\'s invokefunction.metadata)', () => {
    const call = { id: 3, functionId: 'f', data: 1, remainingMs: 10, requestId: undefined, isVoid: false, metadata: { tags: ['todo'] } };
    const decoded = decodeClientMessage(body(encodeCall(call, MAX)));
    expect(decoded).toMatchObject({ kind: 'call', id: 3, metadata: new RawJson('{"tags":["todo"]}') });
    expect(decoded).not.toHaveProperty('traceparent');
    const fire = decodeClientMessage(body(encodeCall({ ...call, id: 0, isVoid: true, metadata: 'plain' }, MAX)));
    expect(fire).toMatchObject({ isVoid: true, metadata: new RawJson('"plain"') });
    expect(decodeClientMessage(body(encodeCall({ ...call, metadata: undefined }, MAX)))).not.toHaveProperty('metadata');
  });

  it('names the channels a call hands the worker (appended field), bounded, and ignores what is not a list of ids', () => {
    const call = { id: 4, functionId: 'f', data: 1, remainingMs: 10, requestId: undefined, isVoid: false, channels: ['abc-1', 'abc-2'] };
    const decoded = decodeClientMessage(body(encodeCall(call, MAX)));
    expect(decoded).toMatchObject({ kind: 'call', id: 4, channels: ['abc-1', 'abc-2'] });
    // The fields before it travel as null: nothing else appears.
    expect(decoded).not.toHaveProperty('metadata');
    expect(decoded).not.toHaveProperty('traceparent');
    expect(decodeClientMessage(body(encodeCall({ ...call, metadata: { m: 1 }, traceparent: 'tp' }, MAX)))).toMatchObject({
      channels: ['abc-1', 'abc-2'],
      metadata: new RawJson('{"m":1}'),
      traceparent: 'tp',
    });
    // None (or an empty list) is the frame an older peer sends.
    expect(encodeCall({ ...call, channels: [] }, MAX)).toEqual(encodeCall({ ...call, channels: undefined }, MAX));
    expect(decodeClientMessage(body(encodeCall({ ...call, channels: undefined }, MAX)))).not.toHaveProperty('channels');
    // A later version may put something else there; a list is cut to 16 ids of at most 64 characters.
    const odd = (channels: unknown) => decodeClientMessage(body(encodeCall({ ...call, channels: channels as string[] }, MAX)));
    expect(odd([1, 2])).not.toHaveProperty('channels');
    expect(odd(['x'.repeat(65), 'ok'])).toMatchObject({ channels: ['ok'] });
    expect((odd(Array.from({ length: 40 }, (_, i) => `c-${i}`)) as { channels: readonly string[] }).channels).toHaveLength(16);
  });

  it('keeps __proto__ keys as data across the hop (msgpackr would rename them)', () => {
    const data = JSON.parse('{"__proto__":{"polluted":true},"a":1}') as unknown;
    const decoded = decodeClientMessage(body(encodeCall({ id: 1, functionId: 'f', data, remainingMs: 1, requestId: undefined, isVoid: false }, MAX)));
    expect(decoded.kind === 'call' && decoded.data instanceof RawJson ? decoded.data.json : '').toBe('{"__proto__":{"polluted":true},"a":1}');
    const result = decodeServerMessage(body(encodeResult(1, { ok: true, value: data }, MAX)));
    expect(result.kind === 'result' && result.outcome.ok ? Object.keys(result.outcome.value as object) : []).toEqual(['__proto__', 'a']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('round-trips every outcome kind, keeping source, code, message and stacktrace', () => {
    const outcomes: InvocationOutcome[] = [
      { ok: true, value: { status_code: 200, body: { ok: true } } },
      { ok: true, value: null },
      { ok: false, failure: { source: 'worker', code: 'invocation_failed', message: 'boom', stacktrace: 'Error: boom\n    at x' } },
      { ok: false, failure: { source: 'worker', code: 'E_CUSTOM', message: 'no stack' } },
      { ok: false, failure: { source: 'engine', code: 'TIMEOUT', message: 'late' } },
      { ok: false, failure: { source: 'engine', code: 'WORKER_DISCONNECTED', message: 'gone' } },
      { ok: false, failure: { source: 'engine', code: 'FUNCTION_UNAVAILABLE', message: 'none' } },
      { ok: false, failure: { source: 'engine', code: 'SHUTTING_DOWN', message: 'bye' } },
    ];
    for (const [index, outcome] of outcomes.entries()) {
      expect(decodeServerMessage(body(encodeResult(index + 1, outcome, MAX)))).toEqual({ kind: 'result', id: index + 1, outcome });
    }
  });

  it("sends a worker's answer as the worker's own frame only to a client that reads it, decoded as the owner decoded it", () => {
    const pad = 'x'.repeat(RESULT_FRAME_MIN_BYTES);
    const workerFrame = Buffer.from(`{"type":"invocationresult","invocation_id":"i-1","function_id":"api::get","result":{"status_code":200,"body":{"__proto__":1,"pad":"${pad}"}}}`);
    const value = JSON.parse(workerFrame.toString('utf8').slice(workerFrame.indexOf('"result":') + 9, -1)) as unknown;
    const outcome: InvocationOutcome = { ok: true, value, frame: workerFrame };
    // The hello says what the client reads; a hello of an older build says nothing (0).
    const hello = decodeClientMessage(body(encodeHello({ version: FORWARD_PROTOCOL_VERSION, cluster: 'c', secret: 's', peerId: 'p' })));
    expect((hello as HelloMessage).features & HELLO_FEATURES.resultFrame).toBe(HELLO_FEATURES.resultFrame);
    expect(decodeClientMessage(raw([0, 2, 'c', 'proof', 'p', 'nonce', 1]))).toMatchObject({ kind: 'hello', features: 0 });
    const asFrame = body(encodeResult(4, outcome, MAX, FRAMES));
    const asValue = body(encodeResult(4, outcome, MAX));
    // A smaller answer goes as a value even to a client that reads frames (cheaper below the size).
    const short = Buffer.from('{"type":"invocationresult","invocation_id":"i-1","result":1}');
    expect(encodeResult(4, { ok: true, value: 1, frame: short }, MAX, FRAMES)).toEqual(encodeResult(4, { ok: true, value: 1 }, MAX));
    expect(asFrame.includes(workerFrame)).toBe(true);
    expect(asValue.includes(workerFrame)).toBe(false);
    for (const encoded of [asFrame, asValue]) {
      const decoded = decodeServerMessage(encoded);
      expect(decoded).toEqual({ kind: 'result', id: 4, outcome: { ok: true, value } });
      // __proto__ stays a key of the data, as JSON.parse leaves it.
      const result = (decoded as { outcome: { value: { body: object } } }).outcome.value;
      expect(Object.keys(result.body)).toEqual(['__proto__', 'pad']);
    }
    // Failures, and values the engine made, go as before whatever the client reads.
    const failure: InvocationOutcome = { ok: false, failure: { source: 'worker', code: 'E', message: 'm' } };
    expect(encodeResult(5, failure, MAX, ALL_FRAMES)).toEqual(encodeResult(5, failure, MAX));
    expect(encodeResult(6, { ok: true, value: 1 }, MAX, ALL_FRAMES)).toEqual(encodeResult(6, { ok: true, value: 1 }, MAX));
    // Nothing but a worker's answer passes: a call, an error answer, bytes that are not a frame.
    malformed(() => decodeServerMessage(raw([8, 1, Buffer.from('{"type":"invokefunction","function_id":"f","data":{}}')])));
    malformed(() => decodeServerMessage(raw([8, 1, Buffer.from('{"type":"invocationresult","invocation_id":"i","error":{"code":"E","message":"m"}}')])));
    malformed(() => decodeServerMessage(raw([8, 1, Buffer.from('{not json')])));
    malformed(() => decodeServerMessage(raw([8, 1, '{"type":"invocationresult","invocation_id":"i","result":1}']))); // text, not bytes
  });

  it('ignores fields appended by a later version', () => {
    expect(decodeClientMessage(raw([3, 1, 'f', 'data', 10, null, false, 'extra', { more: 1 }]))).toMatchObject({ kind: 'call', id: 1 });
    expect(decodeServerMessage(raw([4, 9, '"v"', 'extra']))).toEqual({ kind: 'result', id: 9, outcome: { ok: true, value: 'v' } });
  });

  it('refuses frames of the wrong shape', () => {
    malformed(() => decodeClientMessage(raw({ kind: 'call' })));
    malformed(() => decodeClientMessage(raw([])));
    malformed(() => decodeClientMessage(raw([99])));
    malformed(() => decodeClientMessage(raw([0, 1, 'c', 42, 'peer']))); // secret not a string
    malformed(() => decodeClientMessage(raw([3, -1, 'f', null, 10, null, false]))); // negative id
    malformed(() => decodeClientMessage(raw([3, 1, '', null, 10, null, false]))); // empty function id
    malformed(() => decodeClientMessage(raw([3, 1, 'f', null, 'soon', null, false]))); // remaining not a number
    malformed(() => decodeClientMessage(raw([3, 1, 'f', null, 10, 5, false]))); // request id not a string
    malformed(() => decodeClientMessage(raw([3, 1, 'f', null, 10, null]))); // no void flag
    malformed(() => decodeClientMessage(raw([3, 1, 'f', { not: 'text' }, 10, null, false]))); // data not JSON text
    malformed(() => decodeServerMessage(raw([4, 1, '{not json']))); // result value not JSON
    malformed(() => decodeClientMessage(Buffer.from([0xc1])));
    malformed(() => decodeServerMessage(raw([6, 1, 'NOT_AN_ENGINE_CODE', 'x'])));
    malformed(() => decodeServerMessage(raw([5, 1, 'code', 'message', 42])));
    malformed(() => decodeServerMessage(raw([3, 1, 'f', null, 10, null, false]))); // a client message
  });
});
