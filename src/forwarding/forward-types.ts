import type { InvocationOutcome } from '../invocation/invoker.js';

/**
 * The two messages of the forward protocol that have a binary form besides their msgpack one
 * (forward-messages.ts, forward-binary.ts): here so that both encoders share them.
 */

export interface CallMessage {
  kind: 'call';
  /** Matches the result; 0 for void calls, which get none. */
  id: number;
  functionId: string;
  data: unknown;
  /** Time left, not an absolute deadline: the two ends' clocks are unrelated. */
  remainingMs: number;
  requestId: string | undefined;
  isVoid: boolean;
  /** W3C trace context the worker's invocation carries (docs/observability.md). */
  traceparent?: string | undefined;
  baggage?: string | undefined;
  /** The invocation's `metadata` (a trigger's, or the caller's), handed to the worker unchanged. */
  metadata?: unknown;
  /** The streaming channels the data hands the worker (InvokeOptions.channels). */
  channels?: readonly string[] | undefined;
}

export interface ResultMessage {
  kind: 'result';
  id: number;
  outcome: InvocationOutcome;
}
