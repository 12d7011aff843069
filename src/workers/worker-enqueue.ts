import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Invoker } from '../invocation/invoker.js';
import type { InvokeFunctionMessage, WireError } from '../protocol/messages.js';
import type { EngineCaller, EngineFunctions } from './engine-functions.js';
import { callReply } from './worker-call-reply.js';

/**
 * The function that takes an enqueued call (iii 0.22.1's `ENQUEUE_PROVIDER_FUNCTION_ID`): served by
 * the built-in queue module as an engine function, or by a worker that registered it.
 */
export const ENQUEUE_FUNCTION_ID = 'engine::queue::enqueue';

/** The baggage key that names the function a span belongs to (iii rewrites it for the queued call). */
const FUNCTION_ID_BAGGAGE_KEY = 'iii.function.id';

export interface EnqueueDeps {
  invoker: Invoker;
  engineFunctions: EngineFunctions;
  /** Deadline for handing the call to its provider. */
  timeoutMs: number;
}

export type EnqueueReply = { ok: true; value: { messageReceiptId: string } } | { ok: false; error: WireError & { code: 'enqueue_error' } };

/** What the provider receives: iii's input shape for a `TriggerAction.Enqueue` call. */
export interface EnqueueInput {
  queue: string;
  function_id: string;
  data: unknown;
  messageReceiptId: string;
  traceparent: string | null;
  baggage: string | null;
}

/**
 * A worker's call with `action: {type: "enqueue", queue}` (docs/protocol.md#enqueue). It is never run
 * inline: it becomes one call of `engine::queue::enqueue` — the engine's own function when the queue
 * module serves it, otherwise whichever worker in the cluster registered it — and the caller gets the
 * receipt id the engine made for it. With no provider, or when the provider fails, the caller gets
 * `enqueue_error` (iii 0.22.1, engine/src/engine/mod.rs, the `TriggerAction::Enqueue` arm).
 */
export async function enqueueCall(message: InvokeFunctionMessage, caller: EngineCaller, deps: EnqueueDeps): Promise<EnqueueReply> {
  const input: EnqueueInput = {
    queue: message.action?.queue ?? '',
    function_id: message.function_id,
    data: message.data,
    messageReceiptId: randomUUID(),
    traceparent: message.traceparent ?? null,
    baggage: baggageNaming(message.baggage, message.function_id),
  };
  const engineFunction = deps.engineFunctions.get(ENQUEUE_FUNCTION_ID);
  let reply: { ok: true; value: unknown } | { ok: false; error: WireError };
  if (engineFunction !== undefined) {
    reply = await deps.engineFunctions.call(engineFunction, input, caller);
  } else {
    const options = {
      deadline: performance.now() + deps.timeoutMs,
      ...(message.traceparent === undefined ? {} : { traceparent: message.traceparent }),
      ...(message.baggage === undefined ? {} : { baggage: message.baggage }),
    };
    reply = callReply(await deps.invoker.invoke(ENQUEUE_FUNCTION_ID, input, options));
  }
  if (reply.ok) return { ok: true, value: { messageReceiptId: input.messageReceiptId } };
  return { ok: false, error: { code: 'enqueue_error', message: enqueueErrorMessage(reply.error) } };
}

/** iii's wording: a missing provider names the fix; any other failure is `code: message`. */
function enqueueErrorMessage(error: WireError): string {
  if (error.code === 'function_not_found') {
    return (
      `No queue provider is installed. TriggerAction.Enqueue routes through ${ENQUEUE_FUNCTION_ID}, which the queue module ` +
      `(iii-queue in the config) or a worker provides. (underlying: ${error.message})`
    );
  }
  return `${error.code}: ${error.message}`;
}

/**
 * The caller's baggage with `iii.function.id` naming the enqueued function instead of the caller, as
 * iii hands it to the queue (so the consumer's spans are stamped with the function they run).
 */
export function baggageNaming(baggage: string | undefined, functionId: string): string {
  const kept = (baggage ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '' && entry.split('=')[0]?.trim() !== FUNCTION_ID_BAGGAGE_KEY);
  kept.push(`${FUNCTION_ID_BAGGAGE_KEY}=${encodeURIComponent(functionId)}`);
  return kept.join(',');
}
