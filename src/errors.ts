/**
 * Every error code Switchyard produces, in one registry (docs/errors.md lists the same codes; a test
 * keeps the two in step). HTTP codes are upper-case; codes sent to workers on the wire are lower-case
 * snake_case, as iii's own are.
 */
export const HTTP_ERRORS = {
  NOT_FOUND: { status: 404, message: 'No route matches this request' },
  METHOD_NOT_ALLOWED: { status: 405, message: 'The path is bound, but not for this method' },
  CONDITION_NOT_MET: { status: 422, message: 'The route condition was not met' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'Request body exceeds the body limit' },
  INVALID_JSON: { status: 400, message: 'Request body is not valid JSON' },
  INVALID_PATH: { status: 400, message: 'Request target must be an absolute path with valid percent-encoding' },
  MALFORMED_REQUEST: { status: 400, message: 'The request is not valid HTTP/1.1' },
  HEADERS_TOO_LARGE: { status: 431, message: 'Request headers exceed the header size limit' },
  REQUEST_TIMEOUT: { status: 408, message: 'Request body was not received in time' },
  OVERLOADED: { status: 503, message: 'Too many concurrent requests' },
  FUNCTION_UNAVAILABLE: { status: 503, message: 'No connected worker serves this function' },
  TIMEOUT: { status: 504, message: 'The request deadline passed' },
  WORKER_DISCONNECTED: { status: 502, message: 'The worker disconnected before answering' },
  INVALID_RESPONSE: { status: 502, message: 'The handler returned an invalid response' },
  MIDDLEWARE_FAILED: { status: 500, message: 'A middleware function failed' },
  CORS_NOT_ALLOWED: { status: 403, message: 'CORS preflight rejected: origin or method not allowed' },
  SHUTTING_DOWN: { status: 503, message: 'The engine is shutting down' },
  TOO_MANY_CONNECTIONS: { status: 503, message: 'The worker listener holds as many connections as it may in this process' },
  INTERNAL_ERROR: { status: 500, message: 'Internal engine error' },
} as const satisfies Record<string, { status: number; message: string }>;

export type HttpErrorCode = keyof typeof HTTP_ERRORS;

/**
 * The engine-side reasons an invocation fails (the Invoker's `engine` failures). Each is an HTTP code;
 * the forward protocol accepts exactly these from a peer (forwarding/forward-messages.ts).
 */
export const ENGINE_FAILURE_CODES = ['TIMEOUT', 'WORKER_DISCONNECTED', 'FUNCTION_UNAVAILABLE', 'SHUTTING_DOWN'] as const satisfies readonly HttpErrorCode[];

export type EngineFailureCode = (typeof ENGINE_FAILURE_CODES)[number];

/**
 * Codes the engine sends to workers in `triggerregistrationresult.error`, `invocationresult.error`
 * and the `error` frame. Every error the engine makes for a worker is typed with one of these
 * (EngineWireError, protocol/messages.ts); a worker's own error is relayed unchanged. To add one:
 * a line here and a row in docs/errors.md (test/unit/errors-doc.test.ts checks both).
 */
export const WIRE_ERRORS = {
  invalid_trigger_config: 'The trigger config is invalid',
  // iii's code (its SDKs answer it for a trigger type they do not provide).
  trigger_type_not_found: 'A trigger names a built-in type the engine has no validator for',
  unknown_error: "A worker's error that carried no code, relayed under this one",
  function_not_found: 'No connected worker serves this function',
  invocation_timeout: 'The invocation did not complete before its deadline',
  worker_disconnected: 'The worker serving the invocation disconnected',
  engine_shutting_down: 'The engine is shutting down',
  // An HTTP-invoked function's call (docs/protocol.md#http-invoked-functions), iii's codes.
  url_validation_failed: "The function's URL breaks the iii-http-functions security rules",
  http_request_failed: "The function's URL could not be reached",
  invalid_response: "The function's URL answered 2xx with a body that is not JSON",
  http_error: "The function's URL answered 4xx or 5xx without an {error: {code, message}} body",
  secret_not_found: 'The HMAC secret the registration names is not in the environment',
  token_not_found: 'The bearer token the registration names is not in the environment',
  api_key_not_found: 'The API key the registration names is not in the environment',
  // Engine functions (docs/protocol.md#engine-functions), iii's codes.
  NOT_FOUND: 'The function, trigger, trigger type or worker an engine function was asked about does not exist',
  INVALID_ARGUMENTS: "An engine function's input is invalid",
  invocation_failed: 'An engine function failed',
  // Worker permissions and limits (docs/security.md).
  FORBIDDEN: "The listener's RBAC does not let this worker call the function (iii's code)",
  AUTH_ERROR: "The listener's auth function refused the connection or failed (iii's code; sent as an `error` frame before the close)",
  trigger_registration_failed: 'The route is held by another binding (same method and path shape, another function or principal; iii\'s code)',
  registration_limit: 'The worker holds max_registrations registrations already',
  too_many_calls: "The worker has max_calls_in_flight calls in flight already, or its listener's calls hold max_listener_call_bytes in this process",
  // TriggerAction.Enqueue (docs/protocol.md#enqueue), iii's code.
  enqueue_error: 'An enqueued call could not be handed to engine::queue::enqueue (no provider, or the provider failed)',
  // The built-in queue's functions (docs/queue.md), iii's codes.
  topic_not_set: 'iii::durable::publish was called without a topic, or publish (iii-pubsub) with an empty one',
  queue_not_set: 'A dead-letter function was called without a queue',
  message_id_not_set: 'A dead-letter function was called without a message_id',
  topic_required: 'engine::queue::topic_stats or dlq_messages was called without a topic',
  redrive_failed: "The queue's store failed while redriving its dead letters",
  redrive_message_failed: "The queue's store failed while redriving one dead letter",
  discard_message_failed: "The queue's store failed while discarding one dead letter",
  list_topics_failed: "The queue's store failed while listing queues and topics",
  topic_stats_failed: "The queue's store failed while reading a queue's numbers",
  dlq_topics_failed: "The queue's store failed while counting dead letters",
  dlq_messages_failed: "The queue's store failed while reading dead letters",
  // iii's modules (docs/modules.md), iii's codes.
  deserialization_error: "A module function's input does not have the shape iii expects (a field missing or of the wrong type)",
  SET_ERROR: 'state::set could not write the value (the store failed)',
  GET_ERROR: 'state::get (or the read before state::delete) could not read the value',
  DELETE_ERROR: 'state::delete could not delete the value',
  UPDATE_ERROR: 'state::update could not apply the update',
  LIST_ERROR: 'state::list could not list the scope',
  LIST_GROUPS_ERROR: 'state::list_groups could not list the scopes',
  VALUE_TOO_LARGE: "state::set's value, or the value a state::update or stream::update would write (or stream::set/send's data, stream::update's ops), is larger than the module's max_value_bytes",
  STREAM_SET_ERROR: 'stream::set could not write the item (the store failed, or a custom stream failed or answered nothing)',
  STREAM_GET_ERROR: 'stream::get could not read the item',
  STREAM_DELETE_ERROR: 'stream::delete could not delete the item (the store or a custom stream failed)',
  STREAM_UPDATE_ERROR: 'stream::update could not apply the ops (the store or a custom stream failed)',
  STREAM_GET_GROUP_ERROR: 'stream::list could not list the group',
  STREAM_LIST_GROUPS_ERROR: 'stream::list_groups could not list the groups',
  STREAM_LIST_ALL_ERROR: 'stream::list_all could not list the streams',
  STREAM_SEND_ERROR: 'stream::send could not send the event',
  JSON_ERROR: "A custom stream's answer to stream::set/update has no new_value (iii's code)",
  too_many_channels: 'The worker (64) or its listener (1,024) has as many engine::channels::create channels open as it may',
} as const satisfies Record<string, string>;

export type WireErrorCode = keyof typeof WIRE_ERRORS;

/** Codes of errors thrown inside the engine and caught by the code that reports them (logs, replies). */
export const INTERNAL_ERRORS = {
  MERGE_TOO_DEEP: 'A middleware patch is nested deeper than the merge allows (the request fails with MIDDLEWARE_FAILED)',
} as const;

/** Every code a thrown SwitchyardError may carry. */
export type SwitchyardErrorCode = keyof typeof STARTUP_ERRORS | keyof typeof CLUSTER_ERRORS | keyof typeof INTERNAL_ERRORS;

/** An error with a stable code; the original error, if any, rides on `cause`. */
export class SwitchyardError extends Error {
  readonly code: SwitchyardErrorCode;
  constructor(code: SwitchyardErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SwitchyardError';
    this.code = code;
  }
}

/** Process-level error codes (startup, config) that end the process with a message. */
export const STARTUP_ERRORS = {
  CONFIG_INVALID: 'The configuration is invalid',
  CONFIG_UNREADABLE: 'The configuration file could not be read',
  LISTEN_FAILED: 'A listener could not bind its address',
  USAGE: 'Unknown command-line argument or missing value',
  START_FAILED: 'A child could not start for a reason other than binding',
  UNSUPPORTED_RUNTIME: "This Node.js release does not feed its HTTP parser through the socket's data listener the framing guard replaces",
} as const;

/** Cluster-internal codes: in logs and on `err.code`, never in HTTP responses. */
export const CLUSTER_ERRORS = {
  BUS_UNAVAILABLE: 'Redis could not be reached within the start deadline',
  BUS_CLOSED: 'The bus was closed before it finished starting',
  BUS_STATE: 'A bus operation was attempted in a state that does not allow it',
  BUS_INTERRUPTED: 'A Redis reload or write was cut short by a disconnect (retried on reconnect)',
  BUS_MALFORMED: 'A bus message or peer snapshot failed validation and was ignored',
  BUS_FOREIGN_CLUSTER: 'A bus message of another cluster name was ignored',
  BUS_UNAUTHENTICATED: 'A Redis bus message or peer key without a valid HMAC of the cluster secret was ignored',
  BUS_STALE: 'A Redis bus message stamped more than a minute away from this clock was ignored (a replay, or clocks that disagree)',
  BUS_REPLAYED: 'A Redis bus message seen before (same sender and sequence number) was ignored: a replay',
  BUS_VERSION: 'A Redis bus message or peer key of a newer bus protocol was ignored; the peer is named in the log (docs/scale.md)',
  FORWARD_FRAME_MALFORMED: 'A forward frame could not be decoded; the connection was closed',
  FORWARD_FRAME_TOO_LARGE: 'A forward frame exceeded the maximum size; the connection was closed',
} as const;
