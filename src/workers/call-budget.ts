/**
 * What the calls the workers of one listener have in flight through the engine hold, together, in
 * one process (`max_listener_call_bytes`, docs/security.md#connections). A call's payload stays in
 * the calling process until it is answered (it may be retried on another owner, or wait out a
 * reconnect grace), so `max_calls_in_flight` calls of `max_frame_bytes` each would let one connection
 * hold 16 GB: each call is counted here by the size of the frame that made it, and a call past the
 * budget is answered at once with `too_many_calls`.
 */
export class CallBudget {
  private used = 0;

  constructor(readonly maxBytes: number) {}

  /** Bytes held by the calls in flight now. */
  get held(): number {
    return this.used;
  }

  /** Takes `bytes` for a call; false, taking nothing, when that would pass the budget. */
  take(bytes: number): boolean {
    if (this.used + bytes > this.maxBytes) return false;
    this.used += bytes;
    return true;
  }

  give(bytes: number): void {
    this.used = Math.max(0, this.used - bytes);
  }
}
