import type { JsonParts } from '../invocation/raw-json.js';
import type { OutboundMessage, OutboundWireError } from './messages.js';

/** Encodes one outbound frame. Optional fields that are undefined are omitted by JSON.stringify. */
export function encodeFrame(message: OutboundMessage): string {
  return JSON.stringify(message);
}

/** Longest string jsonString checks itself; a longer one goes to JSON.stringify whole. */
const CHECKED_CHARS = 256;

/**
 * A string as JSON text, exactly as JSON.stringify writes it: between quotes as it is when no
 * character needs escaping (the engine's own ids, function ids, traceparents), else JSON.stringify's.
 * Each JSON.stringify call is a trip into V8's serializer; checking the characters here saved about
 * 1,200 instructions per lone request (three strings per invocation frame; docs/performance.md).
 */
export function jsonString(value: string): string {
  if (value.length > CHECKED_CHARS) return JSON.stringify(value);
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    // Control characters, the quote and the backslash are escaped; past ASCII, lone surrogates are.
    if (code < 0x20 || code > 0x7e || code === 0x22 || code === 0x5c) return JSON.stringify(value);
  }
  return `"${value}"`;
}

/** An invocation frame up to its data's value. */
function invocationHead(invocationId: string, functionId: string): string {
  return `{"type":"invokefunction","invocation_id":${jsonString(invocationId)},"function_id":${jsonString(functionId)},"data":`;
}

/** An invocation frame after its data's value. */
function invocationTail(traceparent?: string, baggage?: string, metadataJson?: string): string {
  // baggage may hold anything: escaped where it must be, as everything else.
  const trace = (traceparent === undefined ? '' : `,"traceparent":${jsonString(traceparent)}`) + (baggage === undefined ? '' : `,"baggage":${jsonString(baggage)}`);
  const metadata = metadataJson === undefined ? '' : `,"metadata":${metadataJson}`;
  return `${trace}${metadata}}`;
}

/**
 * The hot-path encoder for an engine→worker invocation: avoids building an intermediate object per
 * request. `dataJson` is the already-serialised payload.
 */
export function encodeInvocation(invocationId: string, functionId: string, dataJson: string, traceparent?: string, baggage?: string, metadataJson?: string): string {
  return `${invocationHead(invocationId, functionId)}${dataJson}${invocationTail(traceparent, baggage, metadataJson)}`;
}

/**
 * The same frame as encodeInvocation's, as its UTF-8 bytes, for data held as parts (RawJson.spliced):
 * the data's bytes are copied in once, never decoded. Byte for byte what encodeInvocation's text
 * encodes to (test/unit/encode-invocation-bytes.test.ts).
 */
export function encodeInvocationBytes(invocationId: string, functionId: string, data: JsonParts, traceparent?: string, baggage?: string, metadataJson?: string): Buffer {
  const head = `${invocationHead(invocationId, functionId)}${data.head}`;
  const tail = `${data.tail}${invocationTail(traceparent, baggage, metadataJson)}`;
  const headBytes = Buffer.byteLength(head);
  const bodyEnd = headBytes + data.bytes.length;
  const frame = Buffer.allocUnsafe(bodyEnd + Buffer.byteLength(tail));
  frame.write(head, 0);
  data.bytes.copy(frame, headBytes);
  frame.write(tail, bodyEnd);
  return frame;
}

export function encodeInvocationResult(
  invocationId: string,
  functionId: string,
  outcome: { ok: true; value: unknown } | { ok: false; error: OutboundWireError },
): string {
  return outcome.ok
    ? encodeFrame({ type: 'invocationresult', invocation_id: invocationId, function_id: functionId, result: outcome.value ?? undefined })
    : encodeFrame({ type: 'invocationresult', invocation_id: invocationId, function_id: functionId, error: outcome.error });
}
