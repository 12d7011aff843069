/**
 * Worker wire messages, as iii-sdk 0.9–0.22 speaks them (docs/protocol.md). Field names stay
 * snake_case as on the wire. Only the fields the engine reads are typed; unknown fields are ignored.
 */

import type { WireErrorCode } from '../errors.js';

/** An error as a worker sends it: any code. */
export interface WireError {
  code: string;
  message: string;
  stacktrace?: string;
}

/** An error the engine itself sends to a worker: its code is in the registry (src/errors.ts WIRE_ERRORS). */
export interface EngineWireError extends WireError {
  code: WireErrorCode;
}

declare const relayedBrand: unique symbol;

/** A worker's own error on its way, unchanged, to the worker that made the call (made by `relayed`). */
export type RelayedWireError = WireError & { readonly [relayedBrand]: true };

/** Marks a worker's error as relayed: the one way an error with a code outside the registry goes out. */
export function relayed(error: WireError): RelayedWireError {
  return error as RelayedWireError;
}

/** What the engine may put in an error it sends: its own registered code, or a worker's error relayed. */
export type OutboundWireError = EngineWireError | RelayedWireError;

export interface RegisterFunctionMessage {
  type: 'registerfunction';
  id: string;
  description?: string;
  request_format?: unknown;
  response_format?: unknown;
  metadata?: Record<string, unknown>;
  /** Present when the function is HTTP-invoked by the engine (not supported: refused). */
  invocation?: unknown;
}

export interface UnregisterFunctionMessage {
  type: 'unregisterfunction';
  id: string;
}

export interface RegisterTriggerMessage {
  type: 'registertrigger';
  id: string;
  trigger_type: string;
  function_id: string;
  config: Record<string, unknown>;
  metadata?: Record<string, unknown>;
}

export interface UnregisterTriggerMessage {
  type: 'unregistertrigger';
  id: string;
  trigger_type?: string;
}

export interface InvokeFunctionMessage {
  type: 'invokefunction';
  invocation_id?: string;
  function_id: string;
  data: unknown;
  traceparent?: string;
  baggage?: string;
  /** `{type: 'void'}`: fire and forget; `{type: 'enqueue', queue}`: through the queue (docs/protocol.md#enqueue). */
  action?: { type: string; queue?: string };
  metadata?: unknown;
}

export interface InvocationResultMessage {
  type: 'invocationresult';
  invocation_id: string;
  function_id: string;
  /** Absent when the handler returned undefined/null. */
  result?: unknown;
  error?: WireError;
  traceparent?: string;
  baggage?: string;
}

export interface ReattachMessage {
  type: 'reattach';
  previous_worker_id: string;
  reattach_token?: string;
}

export interface RegisterServiceMessage {
  type: 'registerservice';
  id: string;
  name?: string;
  description?: string;
}

export interface RegisterTriggerTypeMessage {
  type: 'registertriggertype';
  id: string;
  description?: string;
}

export interface UnregisterTriggerTypeMessage {
  type: 'unregistertriggertype';
  id: string;
}

export interface PingMessage {
  type: 'ping';
}

export interface PongMessage {
  type: 'pong';
}

export interface TriggerRegistrationResultMessage {
  type: 'triggerregistrationresult';
  id: string;
  trigger_type: string;
  function_id: string;
  error?: WireError;
}

export interface WorkerRegisteredMessage {
  type: 'workerregistered';
  worker_id: string;
  reattach_token?: string;
}

/** Every message a worker may send that the engine acts on. */
export type InboundMessage =
  | RegisterFunctionMessage
  | UnregisterFunctionMessage
  | RegisterTriggerMessage
  | UnregisterTriggerMessage
  | InvokeFunctionMessage
  | InvocationResultMessage
  | ReattachMessage
  | RegisterServiceMessage
  | RegisterTriggerTypeMessage
  | UnregisterTriggerTypeMessage
  | TriggerRegistrationResultMessage
  | PingMessage
  | PongMessage;

/** A trigger delivered to (or withdrawn from) the worker that provides its type. */
export interface ProviderTriggerMessage {
  type: 'registertrigger' | 'unregistertrigger';
  id: string;
  trigger_type: string;
  function_id: string;
  config: Record<string, unknown>;
  metadata?: Record<string, unknown>;
}

/** Every message the engine sends to a worker; the errors in it are typed (OutboundWireError). */
export type OutboundMessage =
  | WorkerRegisteredMessage
  | (Omit<TriggerRegistrationResultMessage, 'error'> & { error?: EngineWireError })
  | ProviderTriggerMessage
  | InvokeFunctionMessage
  | (Omit<InvocationResultMessage, 'error'> & { error?: OutboundWireError })
  | PongMessage;
