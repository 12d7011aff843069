/**
 * Which worker the engine recently sent each trace to, so a worker's log record can be attributed by
 * its trace id (docs/observability.md#workers-log-records). iii-sdk sends log records on a telemetry
 * socket of its own that names no worker; a record written inside a handler carries the trace id of
 * the `traceparent` the engine put in that handler's `invokefunction`, and the engine knows which
 * worker it sent that to.
 *
 * Noting runs for every invocation; looking up only when a traced log record arrives. So a note is
 * the trace id's 128 bits written as four 32-bit words into a fixed ring of the last `capacity` notes
 * (with the worker id beside them), and a lookup scans the ring. Keeping a map from trace id to worker
 * current on every note cost about a tenth of the engine's own work on a request (docs/performance.md,
 * issue 26); keeping the noted strings and indexing them lazily kept each note's text alive (a
 * traceparent decoded from a frame is a slice that holds the frame's text), so the ring's memory grew
 * for as long as it was filling (docs/scale.md, issue 28). Now the ring is allocated once and keeps
 * no text but the worker ids, which live as long as their workers.
 *
 * What a lookup answers depends only on the last `capacity` notes: a trace among them names its
 * worker, or nobody (null) when they sent it to more than one (a handler calling another worker's
 * function under the same trace).
 */

/** Invocations remembered per process. */
export const TRACE_OWNERS_CAPACITY = 4096;

/** What a lookup finds: the one worker the trace went to, `null` when it went to several, `undefined` when not seen recently. */
export type TraceOwner = string | null | undefined;

export interface TraceOwnerLookup {
  ownerOf(traceId: string): TraceOwner;
}

/** The four 32-bit words of a trace id being noted or looked up (one buffer: notes and lookups are synchronous). */
const scratch = new Int32Array(4);

/** A character code's value as a lowercase hex digit, or -1 (W3C trace ids are lowercase hex). */
const HEX = new Int8Array(128).fill(-1);
for (let c = 0; c < 16; c++) HEX[c.toString(16).charCodeAt(0)] = c;

/** Reads 32 lowercase hex digits of `text` from `at` into `scratch`; false when any is not one. */
function readTraceId(text: string, at: number): boolean {
  for (let word = 0; word < 4; word++) {
    let value = 0;
    for (let i = at + word * 8, end = i + 8; i < end; i++) {
      const code = text.charCodeAt(i);
      const digit = code < 128 ? (HEX[code] as number) : -1;
      if (digit < 0) return false;
      value = (value << 4) | digit;
    }
    scratch[word] = value;
  }
  return true;
}

export class RecentTraceOwners implements TraceOwnerLookup {
  /** Word k of the trace id of the note at ring place i is at `words[4 * i + k]`. */
  private readonly words: Int32Array;
  private readonly workers: (string | undefined)[];
  /**
   * A hash index over the ring, allocated once: for each bucket the newest note whose trace id hashes
   * there (its ring place + 1, 0 for none, and its number), and for each ring place the note before it
   * in the same bucket. A chain runs from newest to oldest, so a lookup stops at the first note that
   * has left the ring (its place may since hold another note; the numbers tell).
   */
  private readonly heads: Int32Array;
  private readonly headNumbers: Float64Array;
  private readonly nexts: Int32Array;
  private readonly nextNumbers: Float64Array;
  private readonly bucketMask: number;
  /** Notes made so far; note n is at `n % capacity` while it is among the last `capacity`. */
  private noted = 0;

  constructor(private readonly capacity = TRACE_OWNERS_CAPACITY) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`trace owners capacity must be a positive integer, not ${capacity}`);
    this.words = new Int32Array(4 * capacity);
    this.workers = new Array<string | undefined>(capacity).fill(undefined);
    let buckets = 2;
    while (buckets < 2 * capacity) buckets *= 2;
    this.bucketMask = buckets - 1;
    this.heads = new Int32Array(buckets);
    this.headNumbers = new Float64Array(buckets);
    this.nexts = new Int32Array(capacity);
    this.nextNumbers = new Float64Array(capacity);
  }

  /** Traces remembered now (for tests and diagnostics: it builds a set). */
  get size(): number {
    const seen = new Set<string>();
    const { words } = this;
    for (let i = 0, held = Math.min(this.noted, this.capacity); i < held; i++) seen.add(`${words[4 * i]},${words[4 * i + 1]},${words[4 * i + 2]},${words[4 * i + 3]}`);
    return seen.size;
  }

  /**
   * The engine is sending an invocation with this `traceparent` to `workerId`. Anything that is not
   * `vv-<32 lowercase hex>-…` shaped is ignored (the engine's own are always version 00; a worker's is handed on as given).
   */
  noteTraceparent(traceparent: string, workerId: string): void {
    if (traceparent.length < 36 || traceparent.charCodeAt(2) !== 0x2d || traceparent.charCodeAt(35) !== 0x2d || !readTraceId(traceparent, 3)) return;
    this.record(workerId);
  }

  /** The engine is sending an invocation of trace `traceId` (32 lowercase hex digits; anything else is ignored) to `workerId`. */
  note(traceId: string, workerId: string): void {
    if (traceId.length === 32 && readTraceId(traceId, 0)) this.record(workerId);
  }

  ownerOf(traceId: string): TraceOwner {
    if (traceId.length !== 32 || !readTraceId(traceId, 0)) return undefined;
    const a = scratch[0] as number;
    const b = scratch[1] as number;
    const c = scratch[2] as number;
    const d = scratch[3] as number;
    const bucket = (a ^ b ^ c ^ d) & this.bucketMask;
    const { words, workers, nexts, nextNumbers } = this;
    const oldest = this.noted - this.capacity;
    let found: string | undefined;
    let place = (this.heads[bucket] as number) - 1;
    let number = this.headNumbers[bucket] as number;
    while (place >= 0 && number >= oldest) {
      const at = 4 * place;
      if (words[at] === a && words[at + 1] === b && words[at + 2] === c && words[at + 3] === d) {
        const worker = workers[place] as string;
        if (found === undefined) found = worker;
        else if (found !== worker) return null;
      }
      number = nextNumbers[place] as number;
      place = (nexts[place] as number) - 1;
    }
    return found;
  }

  /** Writes the trace id in `scratch` and `workerId` over the oldest note, and links it into its bucket. */
  private record(workerId: string): void {
    const number = this.noted++;
    const place = number % this.capacity;
    const at = 4 * place;
    const a = scratch[0] as number;
    const b = scratch[1] as number;
    const c = scratch[2] as number;
    const d = scratch[3] as number;
    this.words[at] = a;
    this.words[at + 1] = b;
    this.words[at + 2] = c;
    this.words[at + 3] = d;
    this.workers[place] = workerId;
    const bucket = (a ^ b ^ c ^ d) & this.bucketMask;
    this.nexts[place] = this.heads[bucket] as number;
    this.nextNumbers[place] = this.headNumbers[bucket] as number;
    this.heads[bucket] = place + 1;
    this.headNumbers[bucket] = number;
  }
}
