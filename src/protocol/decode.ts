import type { WireErrorCode } from '../errors.js';
import type { InboundMessage, WireError } from './messages.js';
import { isPlainObject } from '../values.js';
import { REGISTRATION_LIMITS } from './limits.js';

/**
 * The one decoder for worker frames: returns a typed message, `ignored` for a well-formed frame of a
 * type the engine does not act on (unknown types are never fatal), or a coded error for a malformed
 * frame. Unknown fields are dropped.
 */
export type DecodeResult =
  | { kind: 'message'; message: InboundMessage }
  | { kind: 'ignored'; type: string }
  | { kind: 'invalid'; code: 'invalid_json' | 'invalid_message'; reason: string };

type Obj = Record<string, unknown>;

const isObject = isPlainObject;
const isNonEmptyString = (v: unknown): v is string => typeof v === 'string' && v.length > 0;
const optString = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const optObject = (v: unknown): Obj | undefined => (isObject(v) ? v : undefined);

function invalid(reason: string): DecodeResult {
  return { kind: 'invalid', code: 'invalid_message', reason };
}

/** A worker's error without a code is relayed under this registered one. */
const NO_CODE: WireErrorCode = 'unknown_error';

function decodeWireError(v: unknown): WireError | undefined {
  if (v === undefined || v === null) return undefined;
  if (isObject(v)) {
    const code = typeof v.code === 'string' && v.code.length > 0 ? v.code : NO_CODE;
    const message = typeof v.message === 'string' ? v.message : JSON.stringify(v);
    const stacktrace = optString(v.stacktrace);
    return stacktrace === undefined ? { code, message } : { code, message, stacktrace };
  }
  // Some clients send a bare string or value as the error: keep it readable.
  return { code: NO_CODE, message: typeof v === 'string' ? v : JSON.stringify(v) };
}

/** Builds a message object with only the present optional fields (the wire omits rather than nulls). */
function withOptional<T extends Obj>(base: T, optional: Obj): T {
  for (const [key, value] of Object.entries(optional)) {
    if (value !== undefined) (base as Obj)[key] = value;
  }
  return base;
}

/** Frames that register something: each is bounded (docs/security.md#limits) before it is read further. */
const REGISTRATION_TYPES = new Set(['registerfunction', 'registertrigger', 'registertriggertype', 'registerservice']);

/**
 * String fields and their length limits (characters), checked on every decoded message. A map by
 * field name, looked up for the few fields a message has, rather than all ten names read from every
 * message (a lookup each on objects of many shapes, on every invocation result).
 */
const FIELD_LIMITS: ReadonlyMap<string, number> = new Map([
  ['id', REGISTRATION_LIMITS.idChars],
  ['function_id', REGISTRATION_LIMITS.idChars],
  ['trigger_type', REGISTRATION_LIMITS.idChars],
  ['invocation_id', REGISTRATION_LIMITS.tokenChars],
  ['previous_worker_id', REGISTRATION_LIMITS.tokenChars],
  ['reattach_token', REGISTRATION_LIMITS.tokenChars],
  ['traceparent', REGISTRATION_LIMITS.tokenChars],
  ['baggage', REGISTRATION_LIMITS.baggageChars],
  ['description', REGISTRATION_LIMITS.descriptionChars],
  ['name', REGISTRATION_LIMITS.descriptionChars],
]);

export function decodeFrame(raw: string | Buffer): DecodeResult {
  let parsed: unknown;
  try {
    parsed = JSON.parse(typeof raw === 'string' ? raw : raw.toString('utf8'));
  } catch (err) {
    return { kind: 'invalid', code: 'invalid_json', reason: (err as Error).message };
  }
  const decoded = decodeMessage(parsed);
  if (decoded.kind === 'message' && REGISTRATION_TYPES.has(decoded.message.type) && raw.length > REGISTRATION_LIMITS.registrationBytes) {
    return invalid(`${decoded.message.type} frame over ${REGISTRATION_LIMITS.registrationBytes} bytes`);
  }
  return decoded;
}

/** The first string field over its length limit, if any (in the message's own order of fields). */
function overLimit(message: InboundMessage): string | undefined {
  const fields = message as unknown as Record<string, unknown>;
  for (const field in fields) {
    const max = FIELD_LIMITS.get(field);
    if (max === undefined) continue;
    const value = fields[field];
    if (typeof value === 'string' && value.length > max) return `${message.type} "${field}" longer than ${max} characters`;
  }
  return undefined;
}

export function decodeMessage(parsed: unknown): DecodeResult {
  const decoded = decodeFields(parsed);
  if (decoded.kind !== 'message') return decoded;
  const problem = overLimit(decoded.message);
  return problem === undefined ? decoded : invalid(problem);
}

function decodeFields(parsed: unknown): DecodeResult {
  if (!isObject(parsed)) return invalid('frame is not a JSON object');
  const type = parsed.type;
  if (typeof type !== 'string') return invalid('frame has no string "type"');
  const m = parsed;

  switch (type) {
    case 'registerfunction':
      if (!isNonEmptyString(m.id) || m.id.trim() === '') return invalid('registerfunction needs a non-empty "id"');
      return {
        kind: 'message',
        message: withOptional(
          { type, id: m.id },
          {
            description: optString(m.description),
            // A `null` format carries nothing; drop it like every other optional field (the wire omits).
            request_format: m.request_format ?? undefined,
            response_format: m.response_format ?? undefined,
            metadata: optObject(m.metadata),
            invocation: m.invocation ?? undefined,
          },
        ),
      };
    case 'unregisterfunction':
      if (!isNonEmptyString(m.id)) return invalid('unregisterfunction needs "id"');
      return { kind: 'message', message: { type, id: m.id } };
    case 'registertrigger': {
      if (!isNonEmptyString(m.id)) return invalid('registertrigger needs "id"');
      // SDK versions differ in the field name; 0.22 sends trigger_type, some older builds `type` is taken.
      const triggerType = m.trigger_type;
      if (!isNonEmptyString(triggerType)) return invalid('registertrigger needs "trigger_type"');
      if (!isNonEmptyString(m.function_id)) return invalid('registertrigger needs "function_id"');
      const config = m.config === undefined || m.config === null ? {} : m.config;
      if (!isObject(config)) return invalid('registertrigger "config" must be an object');
      return {
        kind: 'message',
        message: withOptional(
          { type, id: m.id, trigger_type: triggerType, function_id: m.function_id, config },
          { metadata: optObject(m.metadata) },
        ),
      };
    }
    case 'unregistertrigger':
      if (!isNonEmptyString(m.id)) return invalid('unregistertrigger needs "id"');
      return { kind: 'message', message: withOptional({ type, id: m.id }, { trigger_type: optString(m.trigger_type) }) };
    case 'invokefunction': {
      if (!isNonEmptyString(m.function_id)) return invalid('invokefunction needs "function_id"');
      if (m.invocation_id !== undefined && m.invocation_id !== null && !isNonEmptyString(m.invocation_id)) {
        return invalid('invokefunction "invocation_id" must be a string');
      }
      // `{type: "enqueue", queue}` names its queue (iii's TriggerAction); other actions carry only a type.
      const action = isObject(m.action) && typeof m.action.type === 'string'
        ? typeof m.action.queue === 'string' ? { type: m.action.type, queue: m.action.queue } : { type: m.action.type }
        : undefined;
      return {
        kind: 'message',
        message: withOptional(
          { type, function_id: m.function_id, data: m.data ?? null },
          {
            invocation_id: optString(m.invocation_id),
            traceparent: optString(m.traceparent),
            baggage: optString(m.baggage),
            action,
            metadata: m.metadata ?? undefined,
          },
        ),
      };
    }
    case 'invocationresult': {
      if (!isNonEmptyString(m.invocation_id)) return invalid('invocationresult needs "invocation_id"');
      const functionId = typeof m.function_id === 'string' ? m.function_id : '';
      // One result per call: built field by field, without withOptional's intermediate object.
      const message: Extract<InboundMessage, { type: 'invocationresult' }> = { type, invocation_id: m.invocation_id, function_id: functionId };
      // `null` and a missing key mean the same: the handler returned nothing.
      if (m.result !== undefined && m.result !== null) message.result = m.result;
      const error = decodeWireError(m.error);
      if (error !== undefined) message.error = error;
      if (typeof m.traceparent === 'string') message.traceparent = m.traceparent;
      if (typeof m.baggage === 'string') message.baggage = m.baggage;
      return { kind: 'message', message };
    }
    case 'reattach':
      if (!isNonEmptyString(m.previous_worker_id)) return invalid('reattach needs "previous_worker_id"');
      return {
        kind: 'message',
        message: withOptional(
          { type, previous_worker_id: m.previous_worker_id },
          { reattach_token: optString(m.reattach_token) },
        ),
      };
    case 'registerservice':
      if (!isNonEmptyString(m.id)) return invalid('registerservice needs "id"');
      return {
        kind: 'message',
        message: withOptional({ type, id: m.id }, { name: optString(m.name), description: optString(m.description) }),
      };
    case 'registertriggertype':
      if (!isNonEmptyString(m.id)) return invalid('registertriggertype needs "id"');
      return { kind: 'message', message: withOptional({ type, id: m.id }, { description: optString(m.description) }) };
    case 'unregistertriggertype':
      if (!isNonEmptyString(m.id)) return invalid('unregistertriggertype needs "id"');
      return { kind: 'message', message: { type, id: m.id } };
    case 'triggerregistrationresult':
      if (!isNonEmptyString(m.id)) return invalid('triggerregistrationresult needs "id"');
      return {
        kind: 'message',
        message: withOptional(
          {
            type,
            id: m.id,
            trigger_type: typeof m.trigger_type === 'string' ? m.trigger_type : '',
            function_id: typeof m.function_id === 'string' ? m.function_id : '',
          },
          { error: decodeWireError(m.error) },
        ),
      };
    case 'ping':
    case 'pong':
      return { kind: 'message', message: { type } };
    default:
      return { kind: 'ignored', type };
  }
}
