import { RawJson, toJson } from '../invocation/raw-json.js';
import { FRAME_HEADER_BYTES, FrameError } from './forward-frames.js';
import type { CallMessage, ResultMessage } from './forward-types.js';

/**
 * The binary forms of the forward protocol's two busiest messages, a call and a value result
 * (forward-messages.ts describes the protocol; peers use them only when both ends said so at the
 * handshake, `HELLO_FEATURES.binary`). Every forwarded request pays for one of each, and msgpackr's
 * general encoder and decoder cost as much as the rest of the forward link's own work per request
 * (docs/performance.md, "A binary call and result"). Every other message stays msgpack.
 *
 * A frame body starts with its kind byte; msgpack message arrays start at 0x90 or above, so the two
 * forms never collide. Integers are unsigned big-endian. Bytes after the last field are ignored (a
 * later build may append fields).
 *
 *   call     0x0a, u32 id, u32 remainingMs, u8 flags, u8 channel count (0 without flag 32),
 *            then one u32 per text field: its length in UTF-16 code units, in this order:
 *            functionId, dataJson, and each when its flag is set: requestId, traceparent, baggage,
 *            metadataJson, the channel ids; then u32 byte length and the UTF-8 of all the text
 *            fields one after another
 *            flags: 1 void, 2 requestId, 4 traceparent, 8 baggage, 16 metadata, 32 channels
 *   result   0x0b, u32 id, u8 flags (1: a value follows), u32 byte length, UTF-8 of valueJson
 *
 * A call's text fields travel as one text because each conversion between a string and bytes is a
 * call into Node's native code that costs about a thousand instructions whatever its length; the
 * reader decodes the text once and cuts it by the lengths, which must add up to it exactly.
 */
export const BINARY_KIND = { call: 0x0a, result: 0x0b } as const;

/** A call names at most this many channels, each id at most this long; more is ignored (either form). */
export const MAX_CALL_CHANNELS = 16;
const MAX_CHANNEL_ID_CHARS = 64;

/** The channel ids a reader keeps of those a call names (either form): the first 16, well-formed ones only. */
export function keptChannelIds(ids: readonly unknown[]): string[] | undefined {
  const kept = ids.slice(0, MAX_CALL_CHANNELS).filter((id): id is string => typeof id === 'string' && id.length > 0 && id.length <= MAX_CHANNEL_ID_CHARS);
  return kept.length === 0 ? undefined : kept;
}

const FLAG = { isVoid: 1, requestId: 2, traceparent: 4, baggage: 8, metadata: 16, channels: 32 } as const;
/** The optional text fields' flags, in their order on the wire. */
const OPTIONAL_FLAGS = [FLAG.requestId, FLAG.traceparent, FLAG.baggage, FLAG.metadata] as const;
const U32 = 4;
/** Kind, id, remaining time, flags, channel count. */
const CALL_HEAD = 1 + 4 + 4 + 1 + 1;
const RESULT_HEAD = 1 + 4 + 1;

/**
 * Frames are written into a shared slab and handed out as views of it, as msgpackr does with its
 * own buffer: no allocation per frame. A frame that might not fit in what is left starts a new slab;
 * one that might need more than a quarter of a slab gets a buffer of its exact size instead.
 */
const SLAB_BYTES = 64 * 1024;
const LARGE_BYTES = SLAB_BYTES / 4;
let slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
let slabAt = 0;

/** UTF-8 takes at most three bytes per UTF-16 code unit. */
const worstBytes = (text: string): number => 3 * text.length;
const exactBytes = (text: string): number => Buffer.byteLength(text);

/** A buffer with `bytes` free from the returned offset (the frame's start), and where writing may go on. */
function reserve(bytes: number): { buffer: Buffer; start: number } {
  if (bytes > LARGE_BYTES) return { buffer: Buffer.allocUnsafe(bytes), start: 0 };
  if (slabAt + bytes > slab.length) {
    slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
    slabAt = 0;
  }
  return { buffer: slab, start: slabAt };
}

/** Ends a frame written from `start` to `end`: its length header, the slab's next start, the view. */
function finish(buffer: Buffer, start: number, end: number, maxFrameBytes: number): Buffer {
  const bodyBytes = end - start - FRAME_HEADER_BYTES;
  if (bodyBytes > maxFrameBytes) {
    throw new FrameError('FORWARD_FRAME_TOO_LARGE', `frame of ${bodyBytes} bytes exceeds the limit of ${maxFrameBytes}`);
  }
  buffer.writeUInt32BE(bodyBytes, start);
  // Word-aligned starts, as msgpackr keeps them.
  if (buffer === slab) slabAt = (end + 7) & ~7;
  return buffer.subarray(start, end);
}

/** Writes `text` as u32 byte length and UTF-8 at `at`; returns where it ends. */
function writeText(buffer: Buffer, at: number, text: string): number {
  const written = text.length === 0 ? 0 : buffer.write(text, at + U32);
  buffer.writeUInt32BE(written, at);
  return at + U32 + written;
}

/** A call as a binary frame (header included); throws a FrameError past `maxFrameBytes`. */
export function encodeBinaryCall(call: Omit<CallMessage, 'kind'>, maxFrameBytes: number): Buffer {
  const data = toJson(call.data);
  const metadata = call.metadata === undefined ? undefined : toJson(call.metadata);
  const { functionId, channels } = call;
  const optional = [call.requestId, call.traceparent, call.baggage, metadata];
  // Only the ids a reader keeps are sent.
  const channelCount = channels === undefined ? 0 : Math.min(channels.length, MAX_CALL_CHANNELS);
  let flags = (call.isVoid ? FLAG.isVoid : 0) | (channelCount > 0 ? FLAG.channels : 0);
  let fields = 2 + channelCount;
  let text = functionId + data;
  for (let i = 0; i < OPTIONAL_FLAGS.length; i++) {
    const field = optional[i];
    if (field === undefined) continue;
    flags |= OPTIONAL_FLAGS[i] as number;
    fields += 1;
    text += field;
  }
  for (let i = 0; i < channelCount; i++) text += (channels as readonly string[])[i] as string;
  const head = FRAME_HEADER_BYTES + CALL_HEAD + U32 * fields + U32;
  let bytes = head + worstBytes(text);
  // A large call is measured first, so that its buffer is its size and not three times it.
  if (bytes > LARGE_BYTES) bytes = head + exactBytes(text);
  const { buffer, start } = reserve(bytes);
  let at = start + FRAME_HEADER_BYTES;
  buffer[at] = BINARY_KIND.call;
  buffer.writeUInt32BE(call.id, at + 1);
  buffer.writeUInt32BE(call.remainingMs, at + 5);
  buffer[at + 9] = flags;
  buffer[at + 10] = channelCount;
  at += CALL_HEAD;
  at = buffer.writeUInt32BE(functionId.length, at);
  at = buffer.writeUInt32BE(data.length, at);
  for (const field of optional) if (field !== undefined) at = buffer.writeUInt32BE(field.length, at);
  for (let i = 0; i < channelCount; i++) at = buffer.writeUInt32BE(((channels as readonly string[])[i] as string).length, at);
  return finish(buffer, start, writeText(buffer, at, text), maxFrameBytes);
}

/** A value result as a binary frame (header included); `undefined` travels as no value. */
export function encodeBinaryResult(id: number, value: unknown, maxFrameBytes: number): Buffer {
  const json = value === undefined ? undefined : toJson(value);
  let bytes = FRAME_HEADER_BYTES + RESULT_HEAD + (json === undefined ? 0 : U32 + worstBytes(json));
  if (json !== undefined && bytes > LARGE_BYTES) bytes += exactBytes(json) - worstBytes(json);
  const { buffer, start } = reserve(bytes);
  const at = start + FRAME_HEADER_BYTES;
  buffer[at] = BINARY_KIND.result;
  buffer.writeUInt32BE(id, at + 1);
  buffer[at + 5] = json === undefined ? 0 : 1;
  const end = json === undefined ? at + RESULT_HEAD : writeText(buffer, at + RESULT_HEAD, json);
  return finish(buffer, start, end, maxFrameBytes);
}

function malformed(what: string): FrameError {
  return new FrameError('FORWARD_FRAME_MALFORMED', `malformed ${what}`);
}

/** Reads a binary body field by field; any field that runs past the body is a FrameError. */
class BodyReader {
  at: number;
  constructor(
    private readonly body: Buffer,
    from: number,
    private readonly what: string,
  ) {
    this.at = from;
  }

  u8(): number {
    if (this.at + 1 > this.body.length) throw malformed(this.what);
    const value = this.body[this.at] as number;
    this.at += 1;
    return value;
  }

  u32(): number {
    if (this.at + 4 > this.body.length) throw malformed(this.what);
    const value = this.body.readUInt32BE(this.at);
    this.at += 4;
    return value;
  }

  /** A u32 byte length and that many bytes of UTF-8. */
  text(): string {
    const bytes = this.u32();
    const end = this.at + bytes;
    if (end > this.body.length) throw malformed(this.what);
    const text = this.body.toString('utf8', this.at, end);
    this.at = end;
    return text;
  }
}

/** Decodes a binary call body (its kind byte checked by the caller). */
export function decodeBinaryCall(body: Buffer): CallMessage {
  const read = new BodyReader(body, 1, 'call');
  const id = read.u32();
  const remainingMs = read.u32();
  const flags = read.u8();
  const count = read.u8();
  const channelCount = (flags & FLAG.channels) === 0 ? 0 : count;
  const functionIdLength = read.u32();
  const dataLength = read.u32();
  // -1: the field is absent.
  const requestIdLength = (flags & FLAG.requestId) === 0 ? -1 : read.u32();
  const traceparentLength = (flags & FLAG.traceparent) === 0 ? -1 : read.u32();
  const baggageLength = (flags & FLAG.baggage) === 0 ? -1 : read.u32();
  const metadataLength = (flags & FLAG.metadata) === 0 ? -1 : read.u32();
  const channelLengths: number[] = [];
  for (let i = 0; i < channelCount; i++) channelLengths.push(read.u32());
  const text = read.text();
  let at = 0;
  const next = (length: number): string => {
    const field = text.slice(at, at + length);
    at += length;
    return field;
  };
  const functionId = next(functionIdLength);
  if (functionId.length === 0) throw malformed('call');
  const call: CallMessage = { kind: 'call', id, functionId, data: new RawJson(next(dataLength)), remainingMs, requestId: undefined, isVoid: (flags & FLAG.isVoid) !== 0 };
  if (requestIdLength >= 0) call.requestId = next(requestIdLength);
  if (traceparentLength >= 0) call.traceparent = next(traceparentLength);
  if (baggageLength >= 0) call.baggage = next(baggageLength);
  if (metadataLength >= 0) call.metadata = new RawJson(next(metadataLength));
  const channelIds = keptChannelIds(channelLengths.map(next));
  if (channelIds !== undefined) call.channels = channelIds;
  // The lengths must cut the text exactly (bytes that were not the sender's UTF-8 would not).
  if (at !== text.length) throw malformed('call: field lengths do not match its text');
  return call;
}

/** Decodes a binary result body: the call's value (undefined when none was sent). */
export function decodeBinaryResult(body: Buffer): ResultMessage {
  const read = new BodyReader(body, 1, 'result');
  const id = read.u32();
  if ((read.u8() & 1) === 0) return { kind: 'result', id, outcome: { ok: true, value: undefined } };
  const json = read.text();
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw malformed('result: value is not JSON');
  }
  return { kind: 'result', id, outcome: { ok: true, value } };
}
