import type { HttpFunctionCaller } from '../invocation/http-function-caller.js';
import { encodeFrame } from '../protocol/encode.js';
import type { RegisterFunctionMessage, RegisterTriggerMessage } from '../protocol/messages.js';
import { parseWireInvocation } from '../routing/http-invocation.js';
import type { CustomTriggerRecord, FunctionRecord, TriggerTypeRecord } from '../routing/registrations.js';

/**
 * What a worker's registration messages become on its connection: plain records (the hub publishes
 * them), and the frames a trigger type's provider is sent. No socket, no state: the connection keeps
 * the records, trigger-delivery.ts decides who gets which trigger.
 */

/** Trigger types the engine serves itself; every other type is provided by a worker. */
export const BUILT_IN_TRIGGER_TYPES: ReadonlySet<string> = new Set(['http', 'http_middleware']);

/**
 * A `registerfunction` as a record, or why it is refused. With `invocation` it is HTTP-invoked (the
 * engine calls its URL, http-function-caller.ts); as in iii, one that breaks the iii-http-functions
 * rules is refused (logged by the caller, nothing acknowledged to the worker).
 */
export function functionRecord(message: RegisterFunctionMessage, workerId: string, httpFunctions: HttpFunctionCaller | undefined): FunctionRecord | { refused: string } {
  const record: FunctionRecord = { id: message.id, workerId };
  if (message.invocation !== undefined) {
    const invocation = parseWireInvocation(message.invocation);
    if (typeof invocation === 'string') return { refused: invocation };
    if (httpFunctions === undefined) return { refused: 'HTTP-invoked functions are not enabled on this engine' };
    const refused = httpFunctions.checkRegistration(invocation);
    if (refused !== undefined) return { refused };
    record.invocation = invocation;
  }
  if (message.description !== undefined) record.description = message.description;
  if (message.metadata !== undefined) record.metadata = message.metadata;
  if (message.request_format !== undefined) record.requestFormat = message.request_format;
  if (message.response_format !== undefined) record.responseFormat = message.response_format;
  return record;
}

/** `registertriggertype`: the worker provides the type (the newest provider in the cluster serves it). */
export function triggerTypeRecord(id: string, description: string | undefined, workerId: string, seq: number): TriggerTypeRecord {
  const record: TriggerTypeRecord = { id, workerId, registeredAt: Date.now(), seq };
  if (description !== undefined) record.description = description;
  return record;
}

/** A trigger of a worker-provided type: kept as given, parked until a provider serves its type. */
export function customTriggerRecord(message: RegisterTriggerMessage, workerId: string): CustomTriggerRecord {
  const record: CustomTriggerRecord = { id: message.id, triggerType: message.trigger_type, functionId: message.function_id, workerId, config: message.config };
  if (message.metadata !== undefined) record.metadata = message.metadata;
  return record;
}

/** The frame that hands a trigger to its type's provider, or takes it back (iii's shapes). */
export function providerTriggerFrame(type: 'registertrigger' | 'unregistertrigger', trigger: CustomTriggerRecord): string {
  return encodeFrame({
    type,
    id: trigger.id,
    trigger_type: trigger.triggerType,
    function_id: trigger.functionId,
    config: trigger.config,
    ...(trigger.metadata === undefined ? {} : { metadata: trigger.metadata }),
  });
}
