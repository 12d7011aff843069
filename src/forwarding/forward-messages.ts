import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { ENGINE_FAILURE_CODES } from '../errors.js';
import type { EngineFailureCode, InvocationOutcome } from '../invocation/invoker.js';
import { RawJson, toJson } from '../invocation/raw-json.js';
import { decodeKeepingBody } from '../protocol/answer-body.js';
import { decodeFrame } from '../protocol/decode.js';
import type { CallMessage, ResultMessage } from './forward-types.js';
import { BINARY_KIND, decodeBinaryCall, decodeBinaryResult, encodeBinaryResult, keptChannelIds } from './forward-binary.js';
import { FrameError, decodeBody, encodeFrame } from './forward-frames.js';

/**
 * The forward protocol, between engine processes ("peers"). One persistent connection per pair
 * (Unix socket on one host, TCP across hosts) carries any number of calls at once; results come
 * back in whatever order they finish, matched by call id. Frames: see forward-frames.ts.
 *
 *   client → server  [0 hello, version, cluster, proof, peerId, nonce, timestampMs, features]
 *                    first frame, always; features (appended later in 2, a bit set) says what the
 *                    client reads beyond version 2's first build: 1 = resultFrame, 2 = binary
 *   server → client  [1 helloOk, version, features]                     or
 *                    features (appended later in 2): what the server reads, 2 = binary calls
 *   server → client  [2 reject, reason]                                 then the server closes
 *   client → server  [3 call, id, functionId, dataJson, remainingMs, requestId|null, isVoid,
 *                     traceparent|null, baggage|null, metadataJson|null, channelIds|null]
 *                    (appended in 1: older peers send six fields and ignore the extra ones;
 *                     metadata is the invocation's `metadata`, iii's, as JSON text; channelIds,
 *                     appended later in 2, lists the streaming channels whose refs the data
 *                     carries, whose traffic the owner's heartbeat counts as the worker's)
 *   server → client  [4 resultOk, id, valueJson|null]
 *   server → client  [5 resultWorkerError, id, code, message, stacktrace|null]
 *   server → client  [6 resultEngineError, id, code, message]
 *   server → client  [8 resultFrame, id, workerFrame]   only to a client whose hello had feature 1
 *                    a worker's answer of RESULT_FRAME_MIN_BYTES or more as the worker sent it: its
 *                    invocationresult frame's bytes (msgpack bin), decoded by the client as the owner
 *                    decoded it, so the value is not serialised again on the owner, and a large
 *                    body stays bytes on the client too (answer-body.ts)
 *   client → server  [7 channelAttach, version, cluster, proof, peerId, channelId, key, direction,
 *                     nonce, timestampMs]
 *                    instead of hello, on a connection of its own: joins a streaming channel held by
 *                    the server (docs/streaming.md#across-the-cluster); answered with helloOk, after
 *                    which the connection carries that channel's items (src/channels/tunnel-link.ts),
 *                    or with reject ("not_found", "in_use", or why the handshake failed)
 *   client → server  binary call (forward-binary.ts)  instead of 3, once the helloOk had feature 2
 *   server → client  binary result                    instead of 4, to a client whose hello had 2
 *
 * - The deadline travels as the time left, since the peers' clocks are unrelated; the server
 *   rebuilds it on its own `performance.now()` clock.
 * - A void call (`isVoid`, id 0) gets no result.
 * - An engine FUNCTION_UNAVAILABLE result means the call ran nowhere (the worker left that peer, or
 *   the peer is draining): the client reports it as not dispatched so another owner can be tried.
 * - Anything unexpected (bad length, undecodable body, wrong shape, a call before the handshake, a
 *   frame over the size limit) ends the connection; a refused handshake is told why first.
 * - A void call to RETIRE_WORKER_FUNCTION is not a function call: it asks the peer to retire the
 *   connection of a worker that reattached elsewhere (data: `{"worker_id","reattach_token"}`). It
 *   reaches only the peer's engine, never a worker, and only over an authenticated connection.
 * - Messages are msgpack arrays, kind first: positional fields encode and decode faster than maps,
 *   and elements past the ones listed here are ignored, so a later version can append fields. A
 *   call and a value result, which every forwarded request pays for, also have a binary form that
 *   costs far less to write and read; each end uses it only where the other said it reads it.
 * - Call data and result values travel as JSON text, not as msgpack structures: msgpackr renames
 *   `__proto__` keys, and a forwarded request must reach the worker exactly as a local one would.
 *   The owner splices the data text into the worker's frame as is (RawJson), saving a parse and a
 *   serialisation per forwarded call.
 */
export const FORWARD_PROTOCOL_VERSION = 2;

export type { CallMessage, ResultMessage } from './forward-types.js';

/**
 * Version 2 authenticates without sending the cluster secret (version 1 sent it in clear): a hello
 * carries `proof` = hex HMAC-SHA256(secret, what it says: kind, cluster, peer, channel for an attach,
 * a random nonce and the sender's clock). The server recomputes it, refuses a clock more than
 * PROOF_WINDOW_MS away and a nonce it has seen (a recorded hello cannot be replayed).
 */
export const PROOF_WINDOW_MS = 5 * 60_000;

function proofText(kind: 'hello' | 'attach', cluster: string, peerId: string, nonce: string, timestampMs: number, channelId = ''): string {
  return `switchyard-forward-${kind}\n${cluster}\n${peerId}\n${channelId}\n${nonce}\n${timestampMs}`;
}

function proofOf(secret: string, text: string): string {
  return createHmac('sha256', secret).update(text).digest('hex');
}

/** Whether `message`'s proof was made with `secret` (constant time). */
export function proofHolds(secret: string, message: HelloMessage | ChannelAttachMessage): boolean {
  const kind = message.kind === 'hello' ? 'hello' : 'attach';
  const channelId = message.kind === 'channelAttach' ? message.channelId : '';
  const expected = Buffer.from(proofOf(secret, proofText(kind, message.cluster, message.peerId, message.nonce, message.timestampMs, channelId)), 'hex');
  const given = /^[0-9a-f]{64}$/.test(message.proof) ? Buffer.from(message.proof, 'hex') : Buffer.alloc(expected.length);
  return timingSafeEqual(given, expected) && message.proof.length === 64;
}

/** What a client needs to prove itself: the secret stays with it, a fresh nonce per connection. */
export interface HelloInput {
  version: number;
  cluster: string;
  secret: string;
  peerId: string;
  /** Fixed only by tests (frozen samples); random and now otherwise. */
  nonce?: string;
  timestampMs?: number;
}

/** The reserved void call that retires a reattached worker's previous connection on its peer. */
export const RETIRE_WORKER_FUNCTION = 'engine::cluster::retire-worker';

/** Handshake frames are tiny; a connection that has not said hello cannot make us buffer more. */
export const HELLO_MAX_FRAME_BYTES = 4096;

const KIND = {
  hello: 0,
  helloOk: 1,
  reject: 2,
  call: 3,
  resultOk: 4,
  resultWorkerError: 5,
  resultEngineError: 6,
  channelAttach: 7,
  resultFrame: 8,
} as const;

/**
 * Features (a bit set) a peer reads beyond version 2's first build: a client says its own in its
 * hello, a server in its helloOk. resultFrame: results as the worker's frame; binary: calls and
 * value results in their binary forms (forward-binary.ts).
 */
export const HELLO_FEATURES = { resultFrame: 1, binary: 2 } as const;
const CLIENT_FEATURES = HELLO_FEATURES.resultFrame | HELLO_FEATURES.binary;
const SERVER_FEATURES = HELLO_FEATURES.binary;

export interface HelloMessage {
  kind: 'hello';
  version: number;
  cluster: string;
  proof: string;
  peerId: string;
  nonce: string;
  timestampMs: number;
  /** HELLO_FEATURES bits; 0 from a client of an older build. */
  features: number;
}

/** Opens a tunnel to one end of a channel the server holds (in place of a hello). */
export interface ChannelAttachMessage {
  kind: 'channelAttach';
  version: number;
  cluster: string;
  proof: string;
  peerId: string;
  channelId: string;
  key: string;
  direction: 'read' | 'write';
  nonce: string;
  timestampMs: number;
}

export type ClientMessage = HelloMessage | CallMessage | ChannelAttachMessage;

export type ServerMessage =
  /** features: HELLO_FEATURES bits the server reads; 0 from a server of an older build. */
  | { kind: 'helloOk'; version: number; features: number }
  /** Sent just before the server closes a connection it refuses, so the client can say why. */
  | { kind: 'reject'; reason: string }
  | ResultMessage;

export function encodeHello(hello: HelloInput): Buffer {
  const nonce = hello.nonce ?? randomBytes(16).toString('hex');
  const timestampMs = hello.timestampMs ?? Date.now();
  const proof = proofOf(hello.secret, proofText('hello', hello.cluster, hello.peerId, nonce, timestampMs));
  return encodeFrame([KIND.hello, hello.version, hello.cluster, proof, hello.peerId, nonce, timestampMs, CLIENT_FEATURES], HELLO_MAX_FRAME_BYTES);
}

export function encodeChannelAttach(attach: HelloInput & { channelId: string; key: string; direction: 'read' | 'write' }): Buffer {
  const nonce = attach.nonce ?? randomBytes(16).toString('hex');
  const timestampMs = attach.timestampMs ?? Date.now();
  const proof = proofOf(attach.secret, proofText('attach', attach.cluster, attach.peerId, nonce, timestampMs, attach.channelId));
  return encodeFrame(
    [KIND.channelAttach, attach.version, attach.cluster, proof, attach.peerId, attach.channelId, attach.key, attach.direction, nonce, timestampMs],
    HELLO_MAX_FRAME_BYTES,
  );
}

export function encodeHelloOk(): Buffer {
  return encodeFrame([KIND.helloOk, FORWARD_PROTOCOL_VERSION, SERVER_FEATURES]);
}

export function encodeReject(reason: string): Buffer {
  return encodeFrame([KIND.reject, reason]);
}

export function encodeCall(call: Omit<CallMessage, 'kind'>, maxFrameBytes: number): Buffer {
  const channels = call.channels !== undefined && call.channels.length > 0 ? call.channels : undefined;
  const head: unknown[] = [KIND.call, call.id, call.functionId, toJson(call.data), call.remainingMs, call.requestId ?? null, call.isVoid];
  // The shortest form that says everything: an older peer reads the same frames as before.
  if (call.traceparent === undefined && call.baggage === undefined && call.metadata === undefined && channels === undefined) {
    return encodeFrame(head, maxFrameBytes);
  }
  head.push(call.traceparent ?? null, call.baggage ?? null);
  if (call.metadata !== undefined || channels !== undefined) head.push(call.metadata === undefined ? null : toJson(call.metadata));
  if (channels !== undefined) head.push(channels);
  return encodeFrame(head, maxFrameBytes);
}

/**
 * From this size a worker's answer crosses as its own frame (to a client that reads resultFrame).
 * Measured per answer, owner and client together (docs/performance.md, "result frames"): below
 * about 1 KiB parsing the whole frame on the client costs more than serialising the value again on
 * the owner; from 2 KiB the frame costs 15–35 % less.
 */
export const RESULT_FRAME_MIN_BYTES = 2048;

/** How a server writes results to one client: what that client's hello said it reads. */
export interface ResultForms {
  /** A worker's answer whose frame is at least this long goes as resultFrame (Infinity: never). */
  framesFrom: number;
  /** Value results in their binary form (forward-binary.ts). */
  binary: boolean;
}

/** What a client of the first build of version 2 reads: msgpack values only. */
export const VALUE_RESULTS: ResultForms = Object.freeze({ framesFrom: Number.POSITIVE_INFINITY, binary: false });

/** The result forms for a client whose hello carried `features`. */
export function resultFormsFor(features: number): ResultForms {
  return {
    framesFrom: (features & HELLO_FEATURES.resultFrame) !== 0 ? RESULT_FRAME_MIN_BYTES : Number.POSITIVE_INFINITY,
    binary: (features & HELLO_FEATURES.binary) !== 0,
  };
}

export function encodeResult(id: number, outcome: InvocationOutcome, maxFrameBytes: number, forms: ResultForms = VALUE_RESULTS): Buffer {
  if (outcome.ok) {
    if (outcome.frame !== undefined && outcome.frame.length >= forms.framesFrom) return encodeFrame([KIND.resultFrame, id, outcome.frame], maxFrameBytes);
    if (forms.binary) return encodeBinaryResult(id, outcome.value, maxFrameBytes);
    const valueJson = outcome.value === undefined ? null : toJson(outcome.value);
    return encodeFrame([KIND.resultOk, id, valueJson], maxFrameBytes);
  }
  const failure = outcome.failure;
  if (failure.source === 'engine') return encodeFrame([KIND.resultEngineError, id, failure.code, failure.message]);
  return encodeFrame([KIND.resultWorkerError, id, failure.code, failure.message, failure.stacktrace ?? null]);
}

const ENGINE_CODES: ReadonlySet<string> = new Set<EngineFailureCode>(ENGINE_FAILURE_CODES);

function malformed(what: string): FrameError {
  return new FrameError('FORWARD_FRAME_MALFORMED', `malformed ${what}`);
}

function decodeArray(body: Buffer): unknown[] {
  const value = decodeBody(body);
  if (!Array.isArray(value) || value.length === 0) throw malformed('frame: not a message array');
  return value;
}

const isId = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isString = (v: unknown): v is string => typeof v === 'string';

/** A call's channel ids: bounded in number and length; anything else is ignored, not refused. */
function channelList(value: unknown): string[] | undefined {
  return Array.isArray(value) ? keptChannelIds(value) : undefined;
}

/** The fields a hello and a channel attach both carry (checked by the caller but for nonce and clock). */
function signed(version: number, cluster: string, proof: string, peerId: string, nonce: unknown, timestampMs: unknown) {
  return { version, cluster, proof, peerId, nonce: isString(nonce) ? nonce : '', timestampMs: isId(timestampMs) ? timestampMs : 0 };
}

/**
 * The one decoder for frames a client sends: a typed message or a FrameError. Kept this small so
 * that V8 optimises it soon: a binary call runs only these lines of it, and V8 counts how hot a
 * function is by the bytecode it runs against its size (a call through the whole decoder ran in
 * baseline code, its entry check alone costing some 4,000 instructions per call).
 */
export function decodeClientMessage(body: Buffer): ClientMessage {
  return body[0] === BINARY_KIND.call ? decodeBinaryCall(body) : decodeMsgpackClientMessage(body);
}

function decodeMsgpackClientMessage(body: Buffer): ClientMessage {
  const m = decodeArray(body);
  switch (m[0]) {
    case KIND.hello: {
      // A version-1 hello (secret in field 3, no nonce) decodes too, so it is refused by name.
      const [, version, cluster, proof, peerId, nonce, timestampMs, features] = m;
      if (!isId(version) || !isString(cluster) || !isString(proof) || !isString(peerId)) throw malformed('hello');
      return { kind: 'hello', ...signed(version, cluster, proof, peerId, nonce, timestampMs), features: isId(features) ? features : 0 };
    }
    case KIND.call: {
      const [, id, functionId, data, remainingMs, requestId, isVoid, traceparent, baggage, metadata, channels] = m;
      if (
        !isId(id) ||
        !isString(functionId) ||
        functionId.length === 0 ||
        !isString(data) ||
        typeof remainingMs !== 'number' ||
        !Number.isFinite(remainingMs) ||
        !(requestId === null || isString(requestId)) ||
        typeof isVoid !== 'boolean'
      ) {
        throw malformed('call');
      }
      const call: CallMessage = { kind: 'call', id, functionId, data: new RawJson(data), remainingMs, requestId: requestId ?? undefined, isVoid };
      // Appended fields: taken when they are what this version sends, ignored otherwise (a later
      // version may put something else there).
      if (isString(traceparent)) call.traceparent = traceparent;
      if (isString(baggage)) call.baggage = baggage;
      if (isString(metadata)) call.metadata = new RawJson(metadata);
      const channelIds = channelList(channels);
      if (channelIds !== undefined) call.channels = channelIds;
      return call;
    }
    case KIND.channelAttach: {
      const [, version, cluster, proof, peerId, channelId, key, direction, nonce, timestampMs] = m;
      if (
        !isId(version) ||
        !isString(cluster) ||
        !isString(proof) ||
        !isString(peerId) ||
        !isString(channelId) ||
        !isString(key) ||
        (direction !== 'read' && direction !== 'write')
      ) {
        throw malformed('channel attach');
      }
      return { kind: 'channelAttach', ...signed(version, cluster, proof, peerId, nonce, timestampMs), channelId, key, direction };
    }
    default:
      throw malformed(`frame: unknown client message kind ${String(m[0])}`);
  }
}

/** The one decoder for frames a server sends: a typed message or a FrameError (small, as above). */
export function decodeServerMessage(body: Buffer): ServerMessage {
  return body[0] === BINARY_KIND.result ? decodeBinaryResult(body) : decodeMsgpackServerMessage(body);
}

function decodeMsgpackServerMessage(body: Buffer): ServerMessage {
  const m = decodeArray(body);
  switch (m[0]) {
    case KIND.helloOk:
      if (!isId(m[1])) throw malformed('hello answer');
      return { kind: 'helloOk', version: m[1], features: isId(m[2]) ? m[2] : 0 };
    case KIND.reject:
      if (!isString(m[1])) throw malformed('reject');
      return { kind: 'reject', reason: m[1] };
    case KIND.resultOk: {
      const [, id, valueJson] = m;
      if (!isId(id) || !(valueJson === null || isString(valueJson))) throw malformed('result');
      let value: unknown;
      try {
        value = valueJson === null ? undefined : JSON.parse(valueJson);
      } catch {
        throw malformed('result: value is not JSON');
      }
      return { kind: 'result', id, outcome: { ok: true, value } };
    }
    case KIND.resultFrame: {
      const [, id, frame] = m;
      if (!isId(id) || !Buffer.isBuffer(frame)) throw malformed('result frame');
      // Decoded as the owner decoded it from its worker (a large body stays bytes: answer-body.ts).
      const decoded = decodeKeepingBody(frame) ?? decodeFrame(frame);
      if (decoded.kind !== 'message' || decoded.message.type !== 'invocationresult' || decoded.message.error !== undefined) {
        throw malformed('result frame: not a worker\'s answer');
      }
      return { kind: 'result', id, outcome: { ok: true, value: decoded.message.result } };
    }
    case KIND.resultWorkerError: {
      const [, id, code, message, stacktrace] = m;
      if (!isId(id) || !isString(code) || !isString(message) || !(stacktrace === null || isString(stacktrace))) {
        throw malformed('worker error result');
      }
      const failure =
        stacktrace === null
          ? { source: 'worker' as const, code, message }
          : { source: 'worker' as const, code, message, stacktrace };
      return { kind: 'result', id, outcome: { ok: false, failure } };
    }
    case KIND.resultEngineError: {
      const [, id, code, message] = m;
      if (!isId(id) || !isString(code) || !ENGINE_CODES.has(code) || !isString(message)) {
        throw malformed('engine error result');
      }
      return {
        kind: 'result',
        id,
        outcome: { ok: false, failure: { source: 'engine', code: code as EngineFailureCode, message } },
      };
    }
    default:
      throw malformed(`frame: unknown server message kind ${String(m[0])}`);
  }
}
