import type { OutboundMessage, OutboundWireError } from './messages.js';

/** Encodes one outbound frame. Optional fields that are undefined are omitted by JSON.stringify. */
export function encodeFrame(message: OutboundMessage): string {
  return JSON.stringify(message);
}

/**
 * The hot-path encoder for an engine→worker invocation: avoids building an intermediate object per
 * request. `dataJson` is the already-serialised payload.
 */
export function encodeInvocation(invocationId: string, functionId: string, dataJson: string, traceparent?: string, baggage?: string, metadataJson?: string): string {
  // traceparent is 55 fixed characters of hex and dashes; baggage may hold anything: escaped.
  const trace = (traceparent === undefined ? '' : `,"traceparent":${JSON.stringify(traceparent)}`) + (baggage === undefined ? '' : `,"baggage":${JSON.stringify(baggage)}`);
  const metadata = metadataJson === undefined ? '' : `,"metadata":${metadataJson}`;
  return `{"type":"invokefunction","invocation_id":${JSON.stringify(invocationId)},"function_id":${JSON.stringify(functionId)},"data":${dataJson}${trace}${metadata}}`;
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
