import { randomFillSync } from 'node:crypto';

/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/) as the engine passes it to workers: a
 * request's `traceparent` is honoured when valid, a new trace is started otherwise, and every
 * `invokefunction` for the request carries it (with `baggage`), as iii 0.22.1 sends them, so the
 * worker's spans join the client's trace on every process and node (docs/observability.md).
 */
export interface TraceContext {
  traceId: string;
  /** The span the worker's spans are children of. */
  spanId: string;
  /** `01` sampled, `00` not: decided once, at the edge, and carried unchanged. */
  flags: string;
  /** The `traceparent` header value handed on. */
  traceparent: string;
  baggage?: string;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);
/** Longest baggage handed on (W3C Baggage limits a header to 8,192 bytes). */
const MAX_BAGGAGE_CHARS = 8192;

/** The `baggage` a request hands on: non-empty and within the W3C size limit, else none. */
export function baggageToHand(baggage: string | undefined): string | undefined {
  return baggage !== undefined && baggage.length > 0 && baggage.length <= MAX_BAGGAGE_CHARS ? baggage : undefined;
}

/** The header's trace context when it is valid W3C (version 00, or a later one read as 00). */
export function parseTraceparent(header: string | undefined): { traceId: string; parentId: string; flags: string } | undefined {
  if (header === undefined || header.length < 55 || header.length > 512) return undefined;
  const match = TRACEPARENT.exec(header.trim().toLowerCase());
  if (match === null) return undefined;
  const [, version, traceId, parentId, flags, rest] = match as unknown as [string, string, string, string, string, string | undefined];
  // Version ff is invalid; version 00 has exactly four fields.
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  if (traceId === ZERO_TRACE || parentId === ZERO_SPAN) return undefined;
  return { traceId, parentId, flags };
}

/** Random ids from a pooled buffer: one crypto call per 170 new traces, not one per request. */
const pool = Buffer.alloc(4096);
let offset = pool.length;
const HEX = Buffer.from('0123456789abcdef', 'latin1');
/** A new trace's traceparent is written here and read out as one string (see newTraceparent). */
const scratch = Buffer.from('00-00000000000000000000000000000000-0000000000000000-00', 'latin1');

/**
 * A new trace's `traceparent`, `00-<32 hex>-<16 hex>-<flags>`, from 24 pooled random bytes. Written
 * into a scratch buffer and read out as one flat string: two hex strings and a template of seven parts
 * made a rope that V8 flattened again when the invocation was serialised and the trace id cut out of
 * it, for every request (docs/performance.md, issue 26). The trace and span ids are cut from it.
 */
function newTraceparent(sampled: boolean): string {
  if (offset + 24 > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  // Trace id at 3..35, span id at 36..52: 16 and 8 random bytes, two hex digits each.
  for (let i = 0; i < 24; i++) {
    const byte = pool[offset + i] as number;
    const at = i < 16 ? 3 + 2 * i : 36 + 2 * (i - 16);
    scratch[at] = HEX[byte >> 4] as number;
    scratch[at + 1] = HEX[byte & 0x0f] as number;
  }
  offset += 24;
  scratch[54] = sampled ? 0x31 : 0x30;
  return scratch.toString('latin1', 0, 55);
}

/**
 * The context a request's invocations carry: the client's when its `traceparent` is valid (workers'
 * spans become children of the client's span), else a new trace whose root the engine names, sampled
 * with probability `sampleRatio`.
 */
export function requestTraceContext(traceparent: string | undefined, baggage: string | undefined, sampleRatio: number): TraceContext {
  const incoming = parseTraceparent(traceparent);
  const handedBaggage = baggageToHand(baggage);
  if (incoming !== undefined) {
    return {
      traceId: incoming.traceId,
      spanId: incoming.parentId,
      flags: incoming.flags,
      traceparent: `00-${incoming.traceId}-${incoming.parentId}-${incoming.flags}`,
      ...(handedBaggage === undefined ? {} : { baggage: handedBaggage }),
    };
  }
  const sampled = sampleRatio >= 1 || (sampleRatio > 0 && Math.random() < sampleRatio);
  const handed = newTraceparent(sampled);
  const context: TraceContext = { traceId: handed.substring(3, 35), spanId: handed.substring(36, 52), flags: sampled ? '01' : '00', traceparent: handed };
  if (handedBaggage !== undefined) context.baggage = handedBaggage;
  return context;
}
