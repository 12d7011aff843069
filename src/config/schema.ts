import { z } from 'zod';
import { HTTP_TOKEN } from '../values.js';
import { MIDDLEWARE_PHASES } from './types.js';

/**
 * The config file schemas, in the file's own (snake_case, iii) vocabulary. Each `.describe()` is the
 * user documentation: `describe.ts` renders the README's configuration reference from these schemas.
 * Schemas only validate; mapping to the camelCase `EngineConfig` happens in `parse-config.ts`, so the
 * schemas stay representable as JSON Schema (no transforms) and the docs can be derived from them.
 */

/** The older `modules:` / `class:` form (iii 0.10), for the modules that existed then. */
export const MODULE_CLASSES = {
  api: 'modules::api::RestApiModule',
  admin: 'modules::admin::AdminModule',
  workers: 'modules::workers::WorkerModule',
  cluster: 'modules::cluster::ClusterModule',
} as const;

/**
 * The iii 0.22 `workers:` form: each module's name. iii's own names for what Switchyard implements,
 * `switchyard-…` for Switchyard's own modules. iii 0.22.1 accepts `http` as the newer name of
 * `iii-http` and refuses a file that has both; so does Switchyard (docs/compatibility.md).
 */
export const MODULE_NAMES = {
  api: 'iii-http',
  workers: 'iii-worker-manager',
  observability: 'iii-observability',
  httpFunctions: 'iii-http-functions',
  admin: 'switchyard-admin',
  cluster: 'switchyard-cluster',
} as const;

export const MODULE_NAME_ALIASES: Readonly<Record<string, keyof typeof MODULE_NAMES>> = { http: 'api' };

/** iii modules Switchyard provides without configuration (the engine functions are built in). */
export const BUILT_IN_NAMES: readonly string[] = ['iii-engine-functions'];

export type ModuleKey = keyof typeof MODULE_NAMES;

export const DEFAULT_WORKER_PORT = 49134;

/** V8 heap sizing for engine children (docs/performance.md, "This round"). */
export const DEFAULT_CHILD_NODE_ARGS = ['--heap-growing-percent=50', '--min-semi-space-size=16', '--max-semi-space-size=16'] as const;

// Node clamps a timer delay above 2^31-1 ms to 1 ms, which would turn a huge timeout into an instant one.
const MAX_TIMER_MS = 2_147_483_647;

const port = () => z.int().min(0).max(65535);
const host = () => z.string().min(1);

const corsSchema = z
  .strictObject({
    allowed_origins: z
      .array(z.string().min(1))
      .default([])
      .describe('Origins allowed to make cross-origin requests, for example `https://app.example.com`; `*` allows any origin'),
    allowed_methods: z
      .array(z.string().regex(HTTP_TOKEN, { error: 'must be an HTTP method name' }))
      .default([])
      .describe('HTTP methods allowed in cross-origin requests; matched case-insensitively (stored upper-cased)'),
  })
  .describe(
    'CORS configuration. When unset, CORS is permissive (any origin, preflight answered), as in iii; when set, only the listed origins and methods are allowed',
  );

const middlewareSchema = z.strictObject({
  function_id: z.string().min(1).describe('Function invoked as the middleware'),
  phase: z.enum(MIDDLEWARE_PHASES).default('preHandler').describe('Lifecycle phase the middleware runs in (iii\'s default: preHandler)'),
  priority: z.number().default(0).describe('Order within the phase; lower runs first, ties keep configuration order'),
});

export const restApiModuleSchema = z
  .strictObject({
    port: port().default(3111).describe('Port the HTTP listener binds; 0 picks a free port'),
    host: host().default('0.0.0.0').describe('Address the HTTP listener binds'),
    default_timeout: z
      .int()
      .min(1)
      .max(MAX_TIMER_MS)
      .default(30000)
      .describe('Deadline for processing one request, in milliseconds, covering middleware and handler'),
    concurrency_request_limit: z
      .int()
      .min(1)
      .default(1024)
      .describe('Maximum requests processed at once per engine node; requests beyond it wait for a slot (see `concurrency_queue_limit`), as in iii'),
    concurrency_queue_limit: z
      .int()
      .min(0)
      .default(1024)
      .describe(
        'Switchyard: how many requests beyond `concurrency_request_limit` may wait for a slot per engine node (each within its deadline; 504 `TIMEOUT` when it passes first). Beyond this line, 503 `OVERLOADED` with `Retry-After`; 0 = no waiting',
      ),
    cors: corsSchema.optional(),
    body_limit: z
      .int()
      .min(0)
      .default(1048576)
      .describe(
        'Maximum size in bytes of a request body the engine buffers (JSON, form, text, and other bodies that declare a length within it); larger ones get 413 `PAYLOAD_TOO_LARGE`. Other bodies stream to the handler (docs/streaming.md)',
      ),
    stream_body_limit: z
      .int()
      .min(0)
      .default(0)
      .describe(
        'Maximum size in bytes of a request body streamed to the handler over its `request_body` channel; 0 = no limit. A declared length over it gets 413 `PAYLOAD_TOO_LARGE`; a stream that grows past it is cut and the handler\'s reader fails',
      ),
    trust_proxy: z
      .boolean()
      .default(false)
      .describe('When true, `X-Forwarded-For` is trusted to resolve the client IP; enable only behind a proxy you control'),
    request_id_header: z
      .string()
      .regex(HTTP_TOKEN, { error: 'must be a valid HTTP header name' })
      .default('x-request-id')
      .describe('Header that carries the request id: taken from the request when present, generated otherwise, echoed in the response'),
    ignore_trailing_slash: z
      .boolean()
      .default(false)
      .describe('When true, a route and the same route with a trailing slash match the same requests'),
    not_found_function: z
      .string()
      .min(1)
      .optional()
      .describe('Function invoked when no route matches; when unset, a 404 `NOT_FOUND` error is returned'),
    middleware: z
      .array(middlewareSchema)
      .default([])
      .describe('Middleware functions applied to every route, in addition to those registered by `http_middleware` triggers'),
  })
  .describe('The HTTP listener that serves worker-registered functions as routes (the iii RestApiModule settings, field for field)');

export const adminModuleSchema = z
  .strictObject({
    host: host().default('127.0.0.1').describe('Address the admin listener (health and readiness) binds'),
    port: port().default(9464).describe('Port the admin listener binds; 0 picks a free port'),
  })
  .describe('The admin listener: GET /healthz and GET /readyz. Keep it off public networks');

/** `match("pattern")` (or single quotes), iii's form for a function filter pattern (`*` matches any run of characters). */
export const MATCH_PATTERN = /^\s*match\((?:"([^"]*)"|'([^']*)')\)\s*$/;

const functionFilterSchema = z.union([
  z.string().regex(MATCH_PATTERN, { error: 'must be match("pattern") or a map with a `metadata` key' }),
  z
    .looseObject({ metadata: z.record(z.string(), z.unknown()) })
    .refine((filter) => Object.keys(filter.metadata).length > 0, { error: 'needs at least one metadata condition' }),
]);

export const rbacSchema = z
  .strictObject({
    auth_function_id: z
      .string()
      .min(1)
      .optional()
      .describe('Function called once per worker connection with `{headers, query_params, ip_address}`; its result (iii\'s AuthResult) is the connection\'s permissions and context. If it fails, the worker is refused with an `AUTH_ERROR` frame. Unset: every connection is let in and `expose_functions` alone gates its calls'),
    expose_functions: z
      .array(functionFilterSchema)
      .default([])
      .describe('Functions workers on this listener may call: `match("api::*")` patterns on the id, or `{metadata: {key: value}}` maps on the function\'s metadata (a value may be `match("…")`). Any filter matching allows; the engine\'s infrastructure functions (channels, logging, baggage, engine::workers::register) are always allowed'),
    on_function_registration_function_id: z.string().min(1).optional().describe('Hook called before each function this listener\'s workers register; it returns the (possibly changed) `function_id`, `description`, `metadata`, or fails to refuse'),
    on_trigger_registration_function_id: z.string().min(1).optional().describe('Hook called before each trigger registration; returns the (possibly changed) `trigger_id`, `trigger_type`, `function_id`, `config`, or fails to refuse'),
    on_trigger_type_registration_function_id: z.string().min(1).optional().describe('Hook called before each trigger type registration; returns the (possibly changed) `trigger_type_id`, `description`, or fails to refuse'),
  })
  .describe("Worker RBAC for this listener (iii's `rbac` block, same keys and meaning; docs/security.md)");

export const workerModuleSchema = z
  .strictObject({
    middleware_function_id: z
      .string()
      .min(1)
      .optional()
      .describe("Function every call a worker on this listener makes is handed to instead (iii's listener middleware): it receives `{function_id, payload, action, context}` and decides whether to call the target. Calls to `engine::…` functions bypass it"),
    rbac: rbacSchema.optional(),
    max_registrations: z
      .int()
      .min(1)
      .default(100000)
      .describe('Most functions, triggers and trigger types one worker connection may hold; registrations beyond it are refused (logged, counted in switchyard_worker_limit_hits_total)'),
    max_calls_in_flight: z
      .int()
      .min(1)
      .default(1000)
      .describe('Most calls one worker may have in flight through the engine at once (its own `trigger`s); more are answered at once with `too_many_calls`'),
    max_frames_per_second: z
      .int()
      .min(0)
      .default(100000)
      .describe('Frames per second one worker may send, averaged over a second; beyond it the engine stops reading that worker\'s socket until the next second (TCP backpressure, nothing is dropped). 0: no limit'),
    max_queued_bytes: z
      .int()
      .min(65536)
      .optional()
      .describe('Bytes the engine may have queued for one worker that is not reading them; a worker past it is closed (1008) and its calls fail over, so a stalled worker cannot grow the engine\'s memory. Unset: 64 MiB, or 16 MiB on a listener with `rbac`'),
    max_channels_per_worker: z
      .int()
      .min(1)
      .default(64)
      .describe('Most channels from `engine::channels::create` one worker connection may have open at once; more are answered with `too_many_channels` (counted in switchyard_channels_refused_total)'),
    max_channels: z
      .int()
      .min(1)
      .optional()
      .describe('Most channels from `engine::channels::create` the workers of this listener may have open at once, together, in each engine process; more are answered with `too_many_channels`. Unset: 256, or 32 on a listener with `rbac`'),
    max_channel_frame_bytes: z
      .int()
      .min(65536)
      .default(262144)
      .describe('Largest WebSocket message accepted on a channel socket (`/ws/channels/…`) of this listener, in bytes; a larger one closes that socket (1009) and aborts the channel. iii-sdk sends binary data in 64 KiB frames, so only a larger text message (`sendMessage`) meets it'),
    max_channel_buffer_bytes: z
      .int()
      .min(1048576)
      .default(67108864)
      .describe('Bytes all channels of one engine process may hold together (queued, or handed to a reader and not yet sent); past it no channel queues beyond the item in hand and writers wait for their readers (back-pressure). The first `iii-worker-manager` entry\'s value applies'),
    max_connections: z
      .int()
      .min(1)
      .optional()
      .describe('Most WebSocket connections (`/` and `/otel`, authenticated or not) this listener holds in each engine process; a further upgrade is answered 503 `TOO_MANY_CONNECTIONS` before the handshake (counted in switchyard_worker_limit_hits_total{reason="connections"}). Channel sockets are bounded by the channels instead. Connections not yet upgraded (plain HTTP, or an upgrade request still arriving) are bounded by the same number, separately ({reason="pending_connections"}). Unset: 1,024, or 256 on a listener with `rbac`'),
    max_unauthenticated_connections: z
      .int()
      .min(1)
      .default(64)
      .describe('With `rbac.auth_function_id`: most connections of this listener, in each engine process, whose auth function has not answered yet; a further upgrade is answered 503 `TOO_MANY_CONNECTIONS` ({reason="unauthenticated_connections"}). Their sockets are not read until the answer'),
    max_partial_frame_bytes: z
      .int()
      .min(1048576)
      .optional()
      .describe('Bytes the sockets of this listener may hold together, in each engine process, in messages not yet received whole, each buffered chunk counted as 1 KiB more; past it the socket whose unfinished message is oldest is closed ({reason="partial_frame_bytes"}). At least twice `max_frame_bytes`; unset: twice `max_frame_bytes` (32 MiB)'),
    max_listener_queued_bytes: z
      .int()
      .min(65536)
      .optional()
      .describe('Bytes the engine may have queued towards the workers of this listener together, in each engine process; past it the worker with the most queued is closed (1008) as for `max_queued_bytes` ({reason="listener_queued_bytes"}). At least `max_queued_bytes`; unset: `max_queued_bytes` (64 MiB)'),
    max_listener_call_bytes: z
      .int()
      .min(1024)
      .optional()
      .describe('Bytes the calls the workers of this listener have in flight through the engine may hold together, in each engine process (each counted by the size of its frame: its payload stays until it is answered); a call past it is answered at once with `too_many_calls` ({reason="listener_call_bytes"}). At least `max_frame_bytes`; unset: four times `max_frame_bytes` (64 MiB), or `max_frame_bytes` on a listener with `rbac`'),
    max_listener_registration_bytes: z
      .int()
      .min(1024)
      .optional()
      .describe('Bytes (JSON) the workers of this listener may register together in each engine process; a registration past it is refused ({reason="listener_registration_bytes"}). Every engine process holds every process\'s registrations, so this bounds what the listener\'s tenants put into each process: one budget per process in the cluster. Unset: 1 MiB on a listener with `rbac`; without `rbac`, only the 16 MiB of all the process\'s workers together'),
    host: host().default('0.0.0.0').describe('Address the worker WebSocket listener binds'),
    handshake_timeout_ms: z
      .int()
      .min(1)
      .max(MAX_TIMER_MS)
      .default(10000)
      .describe('How long a connection may take to send its WebSocket upgrade request before it is closed, in milliseconds (iii\'s key and default); never more than the HTTP module\'s `default_timeout` plus one second'),
    port: port()
      .optional()
      .describe('Port the worker WebSocket listener binds; when unset, the top-level `port` (default 49134) is used. If both are set they must be equal'),
    max_frame_bytes: z
      .int()
      .min(1024)
      .default(16777216)
      .describe('Largest WebSocket message accepted from a worker, in bytes; a larger message closes the connection'),
    auth_token: z
      .string()
      .min(1)
      .optional()
      .describe('When set, workers must send `Authorization: Bearer <token>` when connecting; others are refused'),
    reconnect_grace_ms: z
      .int()
      .min(0)
      .max(600000)
      .default(5000)
      .describe('After the last worker serving a function disconnects, its routes stay and requests for them wait up to this long (within their deadline) for a worker to register it again; then 503 FUNCTION_UNAVAILABLE. 0 disables the wait'),
    heartbeat_interval_ms: z
      .int()
      .min(0)
      .max(600000)
      .default(2000)
      .describe('How often the engine pings each worker (WebSocket ping); 0 disables the heartbeat'),
    heartbeat_timeout_ms: z
      .int()
      .min(100)
      .max(3600000)
      .default(5000)
      .describe('A worker that sends nothing (no frame, no pong, no data on the streaming channels of its calls in flight) for this long is dropped as frozen and its in-flight calls end with 502 WORKER_DISCONNECTED; must be greater than heartbeat_interval_ms'),
  })
  .refine((workers) => workers.heartbeat_interval_ms === 0 || workers.heartbeat_timeout_ms > workers.heartbeat_interval_ms, {
    path: ['heartbeat_timeout_ms'],
    error: 'must be greater than heartbeat_interval_ms',
    when: (payload) => numericFields(payload.value, 'heartbeat_interval_ms', 'heartbeat_timeout_ms'),
  })
  .refine((workers) => workers.max_partial_frame_bytes === undefined || workers.max_partial_frame_bytes >= 2 * workers.max_frame_bytes, {
    path: ['max_partial_frame_bytes'],
    error: 'must be at least twice max_frame_bytes, or a single largest frame could be refused',
    when: (payload) => numericFields(payload.value, 'max_frame_bytes', 'max_partial_frame_bytes'),
  })
  .refine((workers) => workers.max_listener_queued_bytes === undefined || workers.max_listener_queued_bytes >= (workers.max_queued_bytes ?? listenerDefaults(workers.rbac !== undefined).maxQueuedBytes), {
    path: ['max_listener_queued_bytes'],
    error: 'must be at least max_queued_bytes',
    when: (payload) => numericFields(payload.value, 'max_listener_queued_bytes'),
  })
  .refine((workers) => workers.max_listener_call_bytes === undefined || workers.max_listener_call_bytes >= workers.max_frame_bytes, {
    path: ['max_listener_call_bytes'],
    error: 'must be at least max_frame_bytes, or a single largest call could be refused',
    when: (payload) => numericFields(payload.value, 'max_frame_bytes', 'max_listener_call_bytes'),
  })
  .describe('The WebSocket listener that iii-sdk workers connect to. Each further `iii-worker-manager` entry opens another listener with a `port` of its own and its own `auth_token`, `rbac`, `middleware_function_id` and limits (iii\'s RBAC listeners; docs/security.md); reconnect grace is the first entry\'s')


/**
 * The defaults of the per-listener budgets that differ on a listener with `rbac` (a restricted one,
 * open to tenants): lower there, so that what a tenant can make a process hold has a bound worth
 * stating (docs/security.md#what-one-process-can-be-made-to-hold; src/workers/memory-bound.ts).
 */
export function listenerDefaults(restricted: boolean): { maxQueuedBytes: number; maxChannels: number; maxConnections: number; listenerCallFrames: number; maxListenerRegistrationBytes: number | undefined } {
  return restricted
    ? { maxQueuedBytes: 16 * 1024 * 1024, maxChannels: 32, maxConnections: 256, listenerCallFrames: 1, maxListenerRegistrationBytes: 1024 * 1024 }
    : { maxQueuedBytes: 64 * 1024 * 1024, maxChannels: 256, maxConnections: 1024, listenerCallFrames: 4, maxListenerRegistrationBytes: undefined };
}

function numericFields(value: unknown, ...keys: string[]): boolean {
  if (typeof value !== 'object' || value === null) return false;
  return keys.every((key) => typeof (value as Record<string, unknown>)[key] === 'number');
}

export const clusterModuleSchema = z
  .strictObject({
    processes: z
      .int()
      .min(1)
      .max(256)
      .optional()
      .describe('Number of engine processes (node:cluster children) sharing the HTTP and worker ports; unset = the number of CPUs available (os.availableParallelism())'),
    redis_url: z
      .string()
      .optional()
      .describe('Redis URL (`redis://host:port/db`) that switches to distributed mode, where engines on several hosts share one route table; unset or empty = embedded mode. `rediss://` connects over TLS; `redis[s]://user:password@host:port` authenticates as that ACL user'),
    redis_tls_ca_file: z
      .string()
      .optional()
      .describe('PEM file of the certificate authority that signed the Redis server\'s certificate, for a `rediss://` URL (default: the system\'s CAs); empty = unset'),
    name: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 letters, digits, ".", "_" or "-"')
      .default('switchyard')
      .describe('Name of the cluster: Redis keys and channels are prefixed with it, and peers of another name are ignored'),
    node_id: z
      .string()
      .optional()
      .describe('Identifier of this host in the cluster; an empty string means unset (then one is generated)'),
    advertise_host: z
      .string()
      .optional()
      .describe('Address peers on other hosts use to reach this node\'s forward listener; unset = this host\'s first non-internal IPv4 address (a container or pod IP), else its host name. An empty string means unset'),
    forward_port: port().optional().describe('TCP port of the forward listener in distributed mode; 0 picks a free port'),
    forward_tls: z
      .strictObject({
        cert_file: z.string().min(1).describe("PEM certificate this node presents to peers (as server and as client); it must name the node's advertise_host"),
        key_file: z.string().min(1).describe('PEM private key of cert_file'),
        ca_file: z.string().min(1).describe("PEM CA that signs every node's certificate: peers whose certificate it did not sign are refused"),
      })
      .optional()
      .describe('Mutual TLS on the TCP forward links between nodes (distributed mode); unset = plain TCP, still authenticated by the HMAC handshake (docs/security.md)'),
    secret: z
      .string()
      .optional()
      .describe('Shared secret that forwarded invocations must present; an empty string means unset'),
    heartbeat_ms: z
      .int()
      .min(1)
      .max(MAX_TIMER_MS)
      .default(1000)
      .describe('Interval between cluster heartbeats, in milliseconds'),
    lease_ms: z
      .int()
      .min(1)
      .max(MAX_TIMER_MS)
      .default(5000)
      .describe('How long a peer stays in the table without a heartbeat, in milliseconds; must be greater than heartbeat_ms'),
    child_node_args: z
      .array(z.string().regex(/^--[a-z0-9][a-z0-9_-]*(=\S+)?$/, 'must be one Node.js or V8 flag, such as --max-semi-space-size=16'))
      .default([...DEFAULT_CHILD_NODE_ARGS])
      .describe(
        'Node.js and V8 flags for the engine processes, after the primary\'s own. The default lets the old generation grow to 1.5 times its live size before a full GC (V8 allows up to 4 times under load), which keeps a child under 150 MB of RSS with 64 KiB bodies at about the same throughput (docs/performance.md), and fixes the young generation at V8\'s own maximum (two 16 MiB semi-spaces) so that a child\'s RSS does not jump by up to 26 MB either way as V8 resizes it (docs/operations.md); `[]` keeps V8\'s defaults',
      ),
    stream_heap_growing_percent: z
      .int()
      .min(0)
      .max(1000)
      .default(200)
      .describe(
        'While a request\'s streamed upload or streamed response moves at least 1 MiB a second, the engine process serving it lets V8\'s old generation grow to (100 + this) percent of its live size before a full GC, and goes back to its own `--heap-growing-percent` when the last such stream ends or slows down: at the default 50 a 1 GiB transfer triggers a full GC every 14–23 MiB (docs/operations.md#memory). 0 turns it off; it does nothing when `child_node_args` sets no `--heap-growing-percent`, or one at least this high',
      ),
  })
  .refine((cluster) => cluster.redis_url === undefined || cluster.redis_url === '' || (cluster.secret ?? '') !== '', {
    path: ['secret'],
    error: 'is required when redis_url is set: forward listeners of other hosts must authenticate callers',
  })
  .refine((cluster) => cluster.lease_ms > cluster.heartbeat_ms, {
    path: ['lease_ms'],
    error: 'must be greater than heartbeat_ms',
    // Run even when an unrelated field failed, so every problem is reported in one pass.
    when: (payload) => numericFields(payload.value, 'lease_ms', 'heartbeat_ms'),
  })
  .describe('Engine processes and hosts sharing one route table (a Switchyard module)');

const ratio = () => z.number().min(0).max(1);

export const observabilityModuleSchema = z
  .strictObject({
    enabled: z.boolean().optional().describe('Turns OpenTelemetry tracing on or off'),
    service_name: z.string().optional().describe('`service.name` of the engine\'s spans and metrics'),
    service_version: z.string().optional().describe('`service.version` resource attribute'),
    service_namespace: z.string().optional().describe('`service.namespace` resource attribute'),
    service_instance_id: z.string().optional().describe('`service.instance.id` resource attribute'),
    exporter: z.enum(['otlp', 'memory', 'both', 'none']).optional().describe('Where spans go: `otlp` (or `both`) exports them; `memory` (iii\'s in-engine store) and `none` mean no export here'),
    endpoint: z.string().optional().describe('OTLP/HTTP collector endpoint (default `http://localhost:4318`); `/v1/traces`, `/v1/metrics`, `/v1/logs` are appended'),
    sampling_ratio: ratio().optional().describe('Share of the traces the engine starts that are sampled, 0.0-1.0 (default 1); a client\'s `traceparent` keeps its own decision (docs/observability.md)'),
    sampling: z.record(z.string(), z.unknown()).optional().describe('Advanced sampling rules (iii\'s `sampling` block)'),
    memory_max_spans: z.int().min(1).optional().describe('Spans kept in memory'),
    live_spans: z.boolean().optional().describe('iii\'s live span view'),
    metrics_enabled: z.boolean().optional().describe('Turns OpenTelemetry metrics on or off'),
    metrics_exporter: z.enum(['memory', 'otlp', 'prometheus']).optional().describe('Where metrics go'),
    prometheus_port: port().optional().describe('Port of iii\'s Prometheus exporter'),
    metrics_retention_seconds: z.int().min(1).optional().describe('How long metrics stay in memory'),
    metrics_max_count: z.int().min(1).optional().describe('Metrics kept in memory'),
    logs_enabled: z.boolean().optional().describe('Turns OpenTelemetry logs on or off'),
    logs_exporter: z.enum(['memory', 'otlp', 'both']).optional().describe('Where logs go'),
    logs_max_count: z.int().min(1).optional().describe('Log records kept in memory'),
    logs_retention_seconds: z.int().min(1).optional().describe('How long log records stay in memory'),
    logs_batch_size: z.int().min(1).max(10000).optional().describe('Batch size of the OTLP logs export'),
    logs_flush_interval_ms: z.int().min(100).max(3600000).optional().describe('Flush interval of the OTLP logs export'),
    logs_sampling_ratio: ratio().optional().describe('Share of log records kept, 0.0-1.0'),
    logs_console_output: z.boolean().optional().describe('Print workers\' log records on the engine\'s console'),
    alerts: z.array(z.record(z.string(), z.unknown())).optional().describe('Metric alert rules'),
    level: z.string().optional().describe('Log level'),
    format: z.string().optional().describe('Log format'),
    collapse_spans: z.array(z.record(z.string(), z.unknown())).optional().describe('Span collapse rules'),
    worker_metrics: z.record(z.string(), z.unknown()).optional().describe('Worker metrics collection (iii 0.22 example configs)'),
  })
  .describe(
    'OpenTelemetry settings, with iii-observability\'s keys: with `exporter: otlp` the engine exports its spans and relays workers\' telemetry over OTLP/HTTP (docs/observability.md); docs/compatibility.md says which keys are applied',
  );

export const httpFunctionsModuleSchema = z
  .strictObject({
    security: z
      .strictObject({
        url_allowlist: z
          .array(z.string().min(1))
          .default([])
          .describe('Hosts (or `*`, or `*.example.com`) that HTTP-invoked functions may call; empty means `*`'),
        block_private_ips: z.boolean().default(true).describe('Refuse URLs whose host is or resolves to a private, loopback or link-local address'),
        require_https: z.boolean().default(true).describe('Refuse `http:` URLs'),
      })
      .prefault({})
      .describe('Where HTTP-invoked functions (`registerfunction` with `invocation`) may send requests'),
  })
  .describe('HTTP-invoked functions: functions a worker registers with a URL, which the engine calls over HTTP (iii-http-functions)');

export const MODULE_SCHEMAS = {
  api: restApiModuleSchema,
  admin: adminModuleSchema,
  workers: workerModuleSchema,
  cluster: clusterModuleSchema,
  observability: observabilityModuleSchema,
  httpFunctions: httpFunctionsModuleSchema,
} as const;

export type RestApiModuleInput = z.output<typeof restApiModuleSchema>;
export type AdminModuleInput = z.output<typeof adminModuleSchema>;
export type WorkerModuleInput = z.output<typeof workerModuleSchema>;
export type ClusterModuleInput = z.output<typeof clusterModuleSchema>;
export type ObservabilityModuleInput = z.output<typeof observabilityModuleSchema>;
export type HttpFunctionsModuleInput = z.output<typeof httpFunctionsModuleSchema>;

const moduleEntry = z.strictObject({
  name: z.string().min(1).describe('Module name, for example `iii-http`'),
  image: z.string().optional().describe('iii runs such an entry as an external worker image; Switchyard skips it with a warning'),
  config: z.record(z.string(), z.unknown()).optional().describe('Module configuration; absent or null means all defaults'),
});

/** The top level of the file; `modules` entries are validated per class by `parse-config.ts`. */
export const topLevelSchema = z
  .strictObject({
    port: port()
      .default(DEFAULT_WORKER_PORT)
      .describe('Port of the worker WebSocket listener (the iii 0.10 place for it); `modules::workers::WorkerModule` may set it instead'),
    workers: z
      .array(moduleEntry)
      .default([])
      .describe(
        'Modules to configure, by name (the iii 0.22 form): `iii-http` (or `http`), `iii-worker-manager`, `iii-observability`, `iii-http-functions`, `iii-state`, `iii-stream`, `iii-pubsub`, `iii-cron`, `iii-queue`, `switchyard-admin`, `switchyard-cluster`. Other iii names are skipped with one warning each',
      ),
    modules: z
      .array(
        z.strictObject({
          class: z.string().min(1).optional().describe('Module class, for example `modules::api::RestApiModule`; set `class` or `name`, not both'),
          name: z.string().min(1).optional().describe('Module name as in `workers`'),
          image: z.string().optional().describe('As in `workers`'),
          config: z
            .record(z.string(), z.unknown())
            .optional()
            .describe('Module configuration; absent or null means all defaults'),
        }),
      )
      .default([])
      .describe('Modules to configure, by `class` (the iii 0.10 form) or by `name` as in `workers`; classes this engine does not implement are skipped with a warning'),
  })
  .describe('The file is iii\'s format (0.22 `workers:` or 0.10 `modules:`). `${VAR}` and `${VAR:default}` are replaced from the environment before parsing; a key set to null (or left empty in YAML) means unset');
