import type { WireErrorCode } from '../errors.js';
import type { EngineFailureCode, InvocationOutcome } from '../invocation/invoker.js';
import type { OutboundWireError } from '../protocol/messages.js';
import { relayed } from '../protocol/messages.js';

const WIRE_CODE_FOR_ENGINE_FAILURE: Record<EngineFailureCode, WireErrorCode> = {
  FUNCTION_UNAVAILABLE: 'function_not_found',
  TIMEOUT: 'invocation_timeout',
  WORKER_DISCONNECTED: 'worker_disconnected',
  SHUTTING_DOWN: 'engine_shutting_down',
};

/**
 * The answer to a worker's call to another worker, as it goes back on the wire: the value, the other
 * worker's own error unchanged (its engine-side `source` tag stays behind), or the engine's failure
 * under its wire code.
 */
export function callReply(outcome: InvocationOutcome): { ok: true; value: unknown } | { ok: false; error: OutboundWireError } {
  if (outcome.ok) return outcome;
  const failure = outcome.failure;
  if (failure.source === 'engine') return { ok: false, error: { code: WIRE_CODE_FOR_ENGINE_FAILURE[failure.code], message: failure.message } };
  return {
    ok: false,
    error: relayed(failure.stacktrace === undefined ? { code: failure.code, message: failure.message } : { code: failure.code, message: failure.message, stacktrace: failure.stacktrace }),
  };
}
