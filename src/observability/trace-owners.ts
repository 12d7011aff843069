/**
 * Which worker the engine recently sent each trace to, so a worker's log record can be attributed by
 * its trace id (docs/observability.md#workers-log-records). iii-sdk sends log records on a telemetry
 * socket of its own that names no worker; a record written inside a handler carries the trace id of
 * the `traceparent` the engine put in that handler's `invokefunction`, and the engine knows which
 * worker it sent that to.
 *
 * Bounded and cheap on the invocation path: a fixed ring of the last `capacity` distinct trace ids,
 * with a map from each to its worker; noting one is a substring, a map lookup and at most one insert
 * and one delete. A trace sent to more than one worker (a handler calling another worker's function
 * under the same trace) is marked ambiguous and attributes nothing.
 */

/** Traces remembered per process. */
export const TRACE_OWNERS_CAPACITY = 4096;

/** What a lookup finds: the one worker the trace went to, `null` when it went to several, `undefined` when not seen recently. */
export type TraceOwner = string | null | undefined;

export interface TraceOwnerLookup {
  ownerOf(traceId: string): TraceOwner;
}

export class RecentTraceOwners implements TraceOwnerLookup {
  /** Trace id → the worker it went to, or null when it went to several. */
  private readonly owners = new Map<string, string | null>();
  /** The remembered trace ids in the order they were first seen; the oldest is overwritten. */
  private readonly ring: (string | undefined)[];
  private next = 0;

  constructor(private readonly capacity = TRACE_OWNERS_CAPACITY) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`trace owners capacity must be a positive integer, not ${capacity}`);
    this.ring = new Array<string | undefined>(capacity);
  }

  get size(): number {
    return this.owners.size;
  }

  /**
   * The engine is sending an invocation with this `traceparent` to `workerId`. Anything that is not
   * `vv-<32 hex>-…` shaped is ignored (the engine's own are always version 00; a worker's is handed on as given).
   */
  noteTraceparent(traceparent: string, workerId: string): void {
    if (traceparent.length < 36 || traceparent.charCodeAt(2) !== 0x2d || traceparent.charCodeAt(35) !== 0x2d) return;
    this.note(traceparent.substring(3, 35), workerId);
  }

  note(traceId: string, workerId: string): void {
    const held = this.owners.get(traceId);
    if (held !== undefined) {
      if (held !== null && held !== workerId) this.owners.set(traceId, null);
      return;
    }
    const evicted = this.ring[this.next];
    if (evicted !== undefined) this.owners.delete(evicted);
    this.ring[this.next] = traceId;
    this.next = this.next + 1 === this.capacity ? 0 : this.next + 1;
    this.owners.set(traceId, workerId);
  }

  ownerOf(traceId: string): TraceOwner {
    return this.owners.get(traceId);
  }
}
