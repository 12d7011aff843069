// Frozen samples of every message peers exchange: the bus (protocol version 1) and the forward
// protocol (version 2). A sample is what a peer of this version sends; each must still decode to the
// same message, and encoding that message must still produce the sample. A failure here means the
// wire changed: bump the protocol version and say so in docs/cluster.md, or undo the change.
import { describe, expect, it } from 'vitest';
import { decodeBusEnvelope, encodeBusMessage } from '../../src/bus/bus-messages.js';
import { checkSnapshot } from '../../src/bus/snapshot-check.js';
import { toWireSnapshot } from '../../src/bus/wire-snapshot.js';
import {
  decodeClientMessage,
  decodeServerMessage,
  encodeCall,
  encodeChannelAttach,
  encodeHello,
  encodeHelloOk,
  encodeReject,
  encodeResult,
  proofHolds,
} from '../../src/forwarding/forward-messages.js';
import type { ChannelAttachMessage, HelloMessage } from '../../src/forwarding/forward-messages.js';
import { encodeBinaryCall } from '../../src/forwarding/forward-binary.js';
import { RawJson } from '../../src/invocation/raw-json.js';

const SNAPSHOT_SAMPLE = {
  v: 1,
  cluster: 'blue',
  message: {
    kind: 'snapshot',
    snapshot: {
      ownerId: 'node-a/0/x1',
      version: 12,
      functions: [
        { id: 'app::get', workerId: 'w1', description: 'gets', metadata: { team: 'a' }, requestFormat: { type: 'object' } },
        {
          id: 'app::hook',
          workerId: 'w1',
          invocation: { url: 'https://hooks.test/x', method: 'POST', timeoutMs: 500, headers: { 'x-a': '1' }, auth: { type: 'hmac', secretKey: 'HOOK_SECRET' } },
        },
      ],
      triggers: [
        {
          id: 't1',
          functionId: 'app::get',
          workerId: 'w1',
          registeredAt: 1700000000000,
          seq: 3,
          type: 'http',
          http: { apiPath: '/items/:id', httpMethod: 'GET', conditionFunctionId: 'app::cond', middlewareFunctionIds: ['app::mw'] },
        },
        { id: 't2', functionId: 'app::mw', workerId: 'w1', registeredAt: 1700000000001, seq: 4, type: 'http_middleware', middleware: { phase: 'onRequest', priority: 5, scopePath: '/items' } },
      ],
      endpoint: { nodeId: 'node-a', socketPath: '/tmp/sy/a.sock', host: '10.0.0.1', port: 4100 },
      workers: [{ id: 'w1', connectedAt: 1700000000000, name: 'api', runtime: 'node', version: '0.22.1', os: 'linux', pid: 42, description: 'd', ipAddress: '127.0.0.1' }],
      departed: [
        {
          workerId: 'w0',
          functionIds: ['app::old'],
          triggers: [{ id: 't0', functionId: 'app::old', workerId: 'w0', registeredAt: 1699999999000, seq: 1, type: 'http', http: { apiPath: '/old', httpMethod: 'POST' } }],
        },
      ],
      publishedAt: 1700000000500,
      triggerTypes: [{ id: 'cron', workerId: 'w1', description: 'schedules', registeredAt: 1700000000002, seq: 5 }],
      customTriggers: [{ id: 'c1', triggerType: 'cron', functionId: 'app::get', workerId: 'w1', config: { every: '5m' }, metadata: { m: 1 } }],
    },
  },
};

const OTHER_BUS_SAMPLES: [string, unknown, unknown][] = [
  ['heartbeat', { v: 1, cluster: 'blue', message: { kind: 'heartbeat', peerId: 'node-a/0/x1', version: 12 } }, { kind: 'heartbeat', peerId: 'node-a/0/x1', version: 12 }],
  ['gone', { v: 1, cluster: 'blue', message: { kind: 'gone', peerId: 'node-a/0/x1' } }, { kind: 'gone', peerId: 'node-a/0/x1' }],
  ['hello', { v: 1, cluster: 'blue', message: { kind: 'hello', peerId: 'node-a/0/x1' } }, { kind: 'hello', peerId: 'node-a/0/x1' }],
];

describe('bus protocol 1: frozen samples', () => {
  it('decodes the snapshot sample into the internal records, and encodes them back to the sample', () => {
    const decoded = decodeBusEnvelope(structuredClone(SNAPSHOT_SAMPLE), 'blue');
    expect(decoded.ok).toBe(true);
    if (!decoded.ok || decoded.message.kind !== 'snapshot') throw new Error('not a snapshot');
    const checked = checkSnapshot(decoded.message.snapshot, false);
    if (!checked.ok) throw new Error(checked.reason);
    const internal = checked.snapshot;
    expect(internal.functions[1]?.invocation).toEqual({ url: 'https://hooks.test/x', method: 'POST', timeoutMs: 500, headers: { 'x-a': '1' }, auth: { type: 'hmac', secretKey: 'HOOK_SECRET' } });
    const route = internal.triggers[0];
    expect(route?.type === 'http' && route.http.pattern.source).toBe('/items/:id');
    expect(internal.triggerTypes?.[0]?.id).toBe('cron');
    expect(internal.customTriggers?.[0]?.config).toEqual({ every: '5m' });
    expect(internal.departed?.[0]?.triggers[0]?.functionId).toBe('app::old');
    // Internal → wire: exactly the sample (parsed patterns stay home).
    expect(JSON.parse(JSON.stringify(encodeBusMessage('blue', { kind: 'snapshot', snapshot: toWireSnapshot(internal) })))).toEqual(SNAPSHOT_SAMPLE);
  });

  it.each(OTHER_BUS_SAMPLES)('decodes and re-encodes the %s sample', (_kind, sample, message) => {
    const decoded = decodeBusEnvelope(sample, 'blue');
    expect(decoded).toEqual({ ok: true, message });
    expect(encodeBusMessage('blue', message as never)).toEqual(sample);
  });

  it('decodes the sync sample (the primary\'s view for a starting child)', () => {
    const sample = { v: 1, cluster: 'blue', message: { kind: 'sync', snapshots: [SNAPSHOT_SAMPLE.message.snapshot] } };
    const decoded = decodeBusEnvelope(structuredClone(sample), 'blue');
    expect(decoded.ok && decoded.message.kind === 'sync' && decoded.message.snapshots.length).toBe(1);
  });

  it('refuses another protocol version', () => {
    expect(decodeBusEnvelope({ ...SNAPSHOT_SAMPLE, v: 2 }, 'blue')).toMatchObject({ ok: false, code: 'BUS_MALFORMED' });
  });
});

/** Frames as a version-2 peer writes them (4-byte length, then a msgpack array or a binary form), hex. */
const NONCE = '00112233445566778899aabbccddeeff';
const AT = 1700000000000;
const FORWARD_SAMPLES = {
  hello:
    '00000082980002a4626c7565d94037303366613435363933616662613335376264646430656631396163396138633432636665633161353962356430323334373861323637646339303538316334ab6e6f64652d612f302f7831d9203030313132323333343435353636373738383939616162626363646465656666cb4278bcfe5680000003',
  /** A hello of the previous build: reads resultFrame, not the binary forms. */
  helloResultFrames:
    '00000082980002a4626c7565d94037303366613435363933616662613335376264646430656631396163396138633432636665633161353962356430323334373861323637646339303538316334ab6e6f64652d612f302f7831d9203030313132323333343435353636373738383939616162626363646465656666cb4278bcfe5680000001',
  /** A hello of version 2's first build, before features were appended: reads no resultFrame. */
  helloNoFeatures:
    '00000081970002a4626c7565d94037303366613435363933616662613335376264646430656631396163396138633432636665633161353962356430323334373861323637646339303538316334ab6e6f64652d612f302f7831d9203030313132323333343435353636373738383939616162626363646465656666cb4278bcfe56800000',
  /** A version-1 hello (the secret in clear): still decodes, so the server can refuse it by name. */
  helloV1: '00000017950001a4626c7565a27333ab6e6f64652d612f302f7831',
  helloOk: '0000000493010202',
  /** A helloOk of a build before features were appended: the server reads no binary call. */
  helloOkNoFeatures: '00000003920102',
  reject: '0000000d9202aa62616420736563726574',
  call: '0000001d970307a76170703a3a666ea77b2261223a317dcd09c4a57265712d31c2',
  voidCall: '00000013970300a76170703a3a666ea46e756c6c64c0c3',
  tracedCall:
    '0000005a990307a76170703a3a666ea77b2261223a317dcd09c4a57265712d31c2d93730302d30616637363531393136636434336464383434386562323131633830333139632d623761643662373136393230333333312d3031a36b3d76',
  resultOk: '0000000b930407a77b2262223a327d',
  resultWorker: '00000016950507a4626f6f6da869742062726f6b65a461742078',
  resultEngine: '00000010940607a754494d454f5554a46c617465',
  resultFrame:
    '00000047930807c4427b2274797065223a22696e766f636174696f6e726573756c74222c22696e766f636174696f6e5f6964223a22692d37222c22726573756c74223a7b2262223a327d7d',
  /** The binary forms (forward-binary.ts): kind byte, u32 fields and lengths, then the text fields as one UTF-8 text. */
  binaryCall: '0000002e0a00000007000009c40200000000070000000700000005000000136170703a3a666e7b2261223a317d7265712d31',
  binaryVoidCall: '000000220a0000000000000000010000000007000000040000000b6170703a3a666e6e756c6c',
  binaryFullCall:
    '0000008a0a00000007000009c43e0200000007000000070000000500000037000000030000000900000002000000020000005b6170703a3a666e7b2261223a317d7265712d3130302d30616637363531393136636434336464383434386562323131633830333139632d623761643662373136393230333333312d30316b3d767b226d223a22c3a9227d63316332',
  binaryResult: '000000110b0000000701000000077b2262223a327d',
  binaryResultNone: '000000060b0000000700',
  channelAttach:
    '0000008e9a0702a4626c7565d94063336138316337643263393030343937386434383432363838366130653934346537666237376431646333663137663561613864383336376133643461313037ab6e6f64652d612f302f7831a56162632d31a16ba472656164d9203030313132323333343435353636373738383939616162626363646465656666cb4278bcfe56800000',
};
const WORKER_FRAME = '{"type":"invocationresult","invocation_id":"i-7","result":{"b":2}}';
const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const body = (hex: string): Buffer => Buffer.from(hex, 'hex').subarray(4);
const MAX = 1 << 20;

describe('forward protocol 2: frozen samples', () => {
  it('encodes every message kind to its sample', () => {
    expect(encodeHello({ version: 2, cluster: 'blue', secret: 's3', peerId: 'node-a/0/x1', nonce: NONCE, timestampMs: AT }).toString('hex')).toBe(FORWARD_SAMPLES.hello);
    expect(encodeHelloOk().toString('hex')).toBe(FORWARD_SAMPLES.helloOk);
    expect(encodeReject('bad secret').toString('hex')).toBe(FORWARD_SAMPLES.reject);
    expect(encodeCall({ id: 7, functionId: 'app::fn', data: { a: 1 }, remainingMs: 2500, requestId: 'req-1', isVoid: false }, MAX).toString('hex')).toBe(FORWARD_SAMPLES.call);
    expect(encodeCall({ id: 0, functionId: 'app::fn', data: null, remainingMs: 100, requestId: undefined, isVoid: true }, MAX).toString('hex')).toBe(FORWARD_SAMPLES.voidCall);
    expect(encodeCall({ id: 7, functionId: 'app::fn', data: { a: 1 }, remainingMs: 2500, requestId: 'req-1', isVoid: false, traceparent: TRACEPARENT, baggage: 'k=v' }, MAX).toString('hex')).toBe(
      FORWARD_SAMPLES.tracedCall,
    );
    expect(encodeResult(7, { ok: true, value: { b: 2 } }, MAX).toString('hex')).toBe(FORWARD_SAMPLES.resultOk);
    expect(encodeResult(7, { ok: false, failure: { source: 'worker', code: 'boom', message: 'it broke', stacktrace: 'at x' } }, MAX).toString('hex')).toBe(FORWARD_SAMPLES.resultWorker);
    expect(encodeResult(7, { ok: false, failure: { source: 'engine', code: 'TIMEOUT', message: 'late' } }, MAX).toString('hex')).toBe(FORWARD_SAMPLES.resultEngine);
    expect(encodeResult(7, { ok: true, value: { b: 2 }, frame: Buffer.from(WORKER_FRAME) }, MAX, { framesFrom: 0, binary: false }).toString('hex')).toBe(FORWARD_SAMPLES.resultFrame);
    expect(encodeBinaryCall({ id: 7, functionId: 'app::fn', data: { a: 1 }, remainingMs: 2500, requestId: 'req-1', isVoid: false }, MAX).toString('hex')).toBe(FORWARD_SAMPLES.binaryCall);
    expect(encodeBinaryCall({ id: 0, functionId: 'app::fn', data: null, remainingMs: 0, requestId: undefined, isVoid: true }, MAX).toString('hex')).toBe(FORWARD_SAMPLES.binaryVoidCall);
    const fullCall = { id: 7, functionId: 'app::fn', data: { a: 1 }, remainingMs: 2500, requestId: 'req-1', isVoid: false, traceparent: TRACEPARENT, baggage: 'k=v', metadata: { m: 'é' }, channels: ['c1', 'c2'] };
    expect(encodeBinaryCall(fullCall, MAX).toString('hex')).toBe(FORWARD_SAMPLES.binaryFullCall);
    const binary = { framesFrom: Number.POSITIVE_INFINITY, binary: true };
    expect(encodeResult(7, { ok: true, value: { b: 2 } }, MAX, binary).toString('hex')).toBe(FORWARD_SAMPLES.binaryResult);
    expect(encodeResult(7, { ok: true, value: undefined }, MAX, binary).toString('hex')).toBe(FORWARD_SAMPLES.binaryResultNone);
    // Failures keep their msgpack form whatever the client reads.
    expect(encodeResult(7, { ok: false, failure: { source: 'engine', code: 'TIMEOUT', message: 'late' } }, MAX, binary).toString('hex')).toBe(FORWARD_SAMPLES.resultEngine);
    expect(
      encodeChannelAttach({ version: 2, cluster: 'blue', secret: 's3', peerId: 'node-a/0/x1', channelId: 'abc-1', key: 'k', direction: 'read', nonce: NONCE, timestampMs: AT }).toString('hex'),
    ).toBe(FORWARD_SAMPLES.channelAttach);
  });

  it('decodes every client message sample', () => {
    const hello = decodeClientMessage(body(FORWARD_SAMPLES.hello));
    expect(hello).toMatchObject({ kind: 'hello', version: 2, cluster: 'blue', peerId: 'node-a/0/x1', nonce: NONCE, timestampMs: AT, features: 3 });
    expect(decodeClientMessage(body(FORWARD_SAMPLES.helloResultFrames))).toMatchObject({ kind: 'hello', version: 2, peerId: 'node-a/0/x1', features: 1 });
    expect(decodeClientMessage(body(FORWARD_SAMPLES.helloNoFeatures))).toMatchObject({ kind: 'hello', version: 2, peerId: 'node-a/0/x1', features: 0 });
    expect(proofHolds('s3', decodeClientMessage(body(FORWARD_SAMPLES.helloNoFeatures)) as HelloMessage)).toBe(true);
    // The secret is not in the frame; the proof holds only for it.
    expect(Buffer.from(FORWARD_SAMPLES.hello, 'hex').includes(Buffer.from('s3'))).toBe(false);
    expect([proofHolds('s3', hello as HelloMessage), proofHolds('s4', hello as HelloMessage)]).toEqual([true, false]);
    expect(decodeClientMessage(body(FORWARD_SAMPLES.helloV1))).toMatchObject({ kind: 'hello', version: 1, cluster: 'blue', peerId: 'node-a/0/x1' });
    const sampleCall = { kind: 'call', id: 7, functionId: 'app::fn', data: new RawJson('{"a":1}'), remainingMs: 2500, requestId: 'req-1', isVoid: false };
    expect(decodeClientMessage(body(FORWARD_SAMPLES.call))).toEqual(sampleCall);
    expect(decodeClientMessage(body(FORWARD_SAMPLES.voidCall))).toMatchObject({ kind: 'call', id: 0, isVoid: true, requestId: undefined });
    // A call from a peer of the previous build (six fields) carries no trace context; one with it, both.
    expect(decodeClientMessage(body(FORWARD_SAMPLES.call))).not.toHaveProperty('traceparent');
    expect(decodeClientMessage(body(FORWARD_SAMPLES.tracedCall))).toMatchObject({ kind: 'call', id: 7, traceparent: TRACEPARENT, baggage: 'k=v' });
    expect(decodeClientMessage(body(FORWARD_SAMPLES.binaryCall))).toEqual(decodeClientMessage(body(FORWARD_SAMPLES.call)));
    expect(decodeClientMessage(body(FORWARD_SAMPLES.binaryVoidCall))).toEqual({
      kind: 'call',
      id: 0,
      functionId: 'app::fn',
      data: new RawJson('null'),
      remainingMs: 0,
      requestId: undefined,
      isVoid: true,
    });
    expect(decodeClientMessage(body(FORWARD_SAMPLES.binaryFullCall))).toEqual({
      ...sampleCall,
      traceparent: TRACEPARENT,
      baggage: 'k=v',
      metadata: new RawJson('{"m":"é"}'),
      channels: ['c1', 'c2'],
    });
    const attach = decodeClientMessage(body(FORWARD_SAMPLES.channelAttach));
    expect(attach).toMatchObject({ kind: 'channelAttach', version: 2, cluster: 'blue', peerId: 'node-a/0/x1', channelId: 'abc-1', key: 'k', direction: 'read', nonce: NONCE, timestampMs: AT });
    expect(proofHolds('s3', attach as ChannelAttachMessage)).toBe(true);
  });

  it('decodes every server message sample', () => {
    expect(decodeServerMessage(body(FORWARD_SAMPLES.helloOk))).toEqual({ kind: 'helloOk', version: 2, features: 2 });
    expect(decodeServerMessage(body(FORWARD_SAMPLES.helloOkNoFeatures))).toEqual({ kind: 'helloOk', version: 2, features: 0 });
    expect(decodeServerMessage(body(FORWARD_SAMPLES.binaryResult))).toEqual(decodeServerMessage(body(FORWARD_SAMPLES.resultOk)));
    expect(decodeServerMessage(body(FORWARD_SAMPLES.binaryResultNone))).toEqual({ kind: 'result', id: 7, outcome: { ok: true, value: undefined } });
    expect(decodeServerMessage(body(FORWARD_SAMPLES.reject))).toEqual({ kind: 'reject', reason: 'bad secret' });
    expect(decodeServerMessage(body(FORWARD_SAMPLES.resultOk))).toEqual({ kind: 'result', id: 7, outcome: { ok: true, value: { b: 2 } } });
    expect(decodeServerMessage(body(FORWARD_SAMPLES.resultWorker))).toEqual({
      kind: 'result',
      id: 7,
      outcome: { ok: false, failure: { source: 'worker', code: 'boom', message: 'it broke', stacktrace: 'at x' } },
    });
    expect(decodeServerMessage(body(FORWARD_SAMPLES.resultEngine))).toEqual({
      kind: 'result',
      id: 7,
      outcome: { ok: false, failure: { source: 'engine', code: 'TIMEOUT', message: 'late' } },
    });
    expect(decodeServerMessage(body(FORWARD_SAMPLES.resultFrame))).toEqual({ kind: 'result', id: 7, outcome: { ok: true, value: { b: 2 } } });
  });
});
