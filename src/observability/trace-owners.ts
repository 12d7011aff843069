/**
 * Which worker the engine recently sent each trace to, so a worker's log record can be attributed by
 * its trace id (docs/observability.md#workers-log-records). iii-sdk sends log records on a telemetry
 * socket of its own that names no worker; a record written inside a handler carries the trace id of
 * the `traceparent` the engine put in that handler's `invokefunction`, and the engine knows which
 * worker it sent that to.
 *
 * Noting runs for every invocation; looking up only when a traced log record arrives. So a note is
 * two array stores into a fixed ring of the last `capacity` notes, and the map from trace id to worker
 * is brought up to date from the ring when a lookup (or `size`) needs it. Keeping the map current on
 * every note (a substring, a lookup, an insert and a delete in a map of 4,096 entries) cost about as
 * much as a tenth of the engine's own work on the request (docs/performance.md, issue 26).
 *
 * What a lookup answers depends only on the last `capacity` notes, not on when lookups came: a trace
 * among them names its worker, or nobody (null) when they sent it to more than one (a handler calling
 * another worker's function under the same trace).
 */

/** Invocations remembered per process. */
export const TRACE_OWNERS_CAPACITY = 4096;

/** What a lookup finds: the one worker the trace went to, `null` when it went to several, `undefined` when not seen recently. */
export type TraceOwner = string | null | undefined;

export interface TraceOwnerLookup {
  ownerOf(traceId: string): TraceOwner;
}

/**
 * A trace as far as notes are indexed: the worker and number of its last note, and where its workers
 * last changed (the number of the note before a note to another worker; -1: never). The last notes
 * name more than one worker exactly when that change is among them.
 */
interface Remembered {
  worker: string;
  last: number;
  changedAfter: number;
}

export class RecentTraceOwners implements TraceOwnerLookup {
  /** The last `capacity` notes: the trace id, or a traceparent whose trace id is cut out when indexed. */
  private readonly texts: (string | undefined)[];
  /** Whether the text at the same place is a whole traceparent (1) or a trace id (0). */
  private readonly isTraceparent: Uint8Array;
  private readonly workers: (string | undefined)[];
  /** Notes made so far; note n is at `n % capacity` while it is among the last `capacity`. */
  private noted = 0;
  /** Notes already in `owners`. */
  private indexed = 0;
  /** Trace id → what its indexed notes say (stale entries are dropped as met). */
  private readonly owners = new Map<string, Remembered>();

  constructor(private readonly capacity = TRACE_OWNERS_CAPACITY) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`trace owners capacity must be a positive integer, not ${capacity}`);
    this.texts = new Array<string | undefined>(capacity);
    this.workers = new Array<string | undefined>(capacity);
    this.isTraceparent = new Uint8Array(capacity);
  }

  /** Traces remembered now. */
  get size(): number {
    this.catchUp();
    const oldest = this.noted - this.capacity;
    for (const [traceId, remembered] of this.owners) if (remembered.last < oldest) this.owners.delete(traceId);
    return this.owners.size;
  }

  /**
   * The engine is sending an invocation with this `traceparent` to `workerId`. Anything that is not
   * `vv-<32 hex>-…` shaped is ignored (the engine's own are always version 00; a worker's is handed on as given).
   */
  noteTraceparent(traceparent: string, workerId: string): void {
    if (traceparent.length < 36 || traceparent.charCodeAt(2) !== 0x2d || traceparent.charCodeAt(35) !== 0x2d) return;
    this.record(traceparent, 1, workerId);
  }

  note(traceId: string, workerId: string): void {
    this.record(traceId, 0, workerId);
  }

  ownerOf(traceId: string): TraceOwner {
    this.catchUp();
    const remembered = this.owners.get(traceId);
    if (remembered === undefined) return undefined;
    const oldest = this.noted - this.capacity;
    if (remembered.last < oldest) {
      this.owners.delete(traceId);
      return undefined;
    }
    return remembered.changedAfter >= 0 && remembered.changedAfter >= oldest ? null : remembered.worker;
  }

  private record(text: string, isTraceparent: 0 | 1, workerId: string): void {
    const at = this.noted % this.capacity;
    this.texts[at] = text;
    this.isTraceparent[at] = isTraceparent;
    this.workers[at] = workerId;
    this.noted++;
  }

  /** Indexes the notes made since the last lookup (those still among the last `capacity`), in order. */
  private catchUp(): void {
    const { capacity, noted } = this;
    if (this.indexed === noted) return;
    let from = Math.max(this.indexed, noted - capacity);
    // Every remembered trace is among the notes indexed so far; past twice the capacity, most are
    // stale: start the map again from the ring.
    if (this.owners.size >= 2 * capacity) {
      this.owners.clear();
      from = Math.max(0, noted - capacity);
    }
    for (let n = from; n < noted; n++) {
      const at = n % capacity;
      const text = this.texts[at] as string;
      const traceId = this.isTraceparent[at] === 1 ? text.substring(3, 35) : text;
      const worker = this.workers[at] as string;
      const remembered = this.owners.get(traceId);
      if (remembered === undefined) this.owners.set(traceId, { worker, last: n, changedAfter: -1 });
      else if (remembered.last < n - capacity) {
        // Its notes left the ring before this one: none of them counts any more.
        remembered.worker = worker;
        remembered.last = n;
        remembered.changedAfter = -1;
      } else {
        if (remembered.worker !== worker) {
          remembered.changedAfter = remembered.last;
          remembered.worker = worker;
        }
        remembered.last = n;
      }
    }
    this.indexed = noted;
  }
}
