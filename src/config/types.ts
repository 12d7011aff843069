/**
 * The validated engine configuration: camelCase, units in the names, deeply frozen. Optional fields are
 * absent (never `undefined`-valued) when unset, so `'cors' in config.api` tells whether CORS was set.
 */
/** The lifecycle phases an `http_middleware` runs in. Here, not in schema.ts: engine children validate
 * phases at registration and must not load the config schemas (zod) to do it. */
export const MIDDLEWARE_PHASES = ['onRequest', 'preHandler', 'postHandler', 'onResponse', 'onError', 'onTimeout'] as const;

export type MiddlewarePhase = (typeof MIDDLEWARE_PHASES)[number];

export interface CorsConfig {
  allowedOrigins: readonly string[];
  allowedMethods: readonly string[];
}

export interface MiddlewareConfig {
  functionId: string;
  phase: MiddlewarePhase;
  priority: number;
}

export interface ApiConfig {
  port: number;
  host: string;
  defaultTimeoutMs: number;
  concurrencyRequestLimit: number;
  /** Requests that may wait for a concurrency slot beyond the limit (docs/http.md#concurrency). */
  concurrencyQueueLimit: number;
  cors?: CorsConfig;
  bodyLimitBytes: number;
  /** Bound on a streamed request body; 0 = none (a number that survives the JSON hand-over to children). */
  streamBodyLimitBytes: number;
  trustProxy: boolean;
  requestIdHeader: string;
  ignoreTrailingSlash: boolean;
  notFoundFunction?: string;
  middleware: readonly MiddlewareConfig[];
}

export interface AdminConfig {
  host: string;
  port: number;
}

/** A function filter of `rbac.expose_functions`: an id pattern, or conditions on the function's metadata. */
export type FunctionFilter =
  | { match: string }
  | { metadata: Readonly<Record<string, { equals: unknown } | { match: string }>> };

/** iii's per-listener worker RBAC (`rbac`), camelCased. */
export interface RbacConfig {
  authFunctionId?: string;
  exposeFunctions: readonly FunctionFilter[];
  onFunctionRegistrationFunctionId?: string;
  onTriggerRegistrationFunctionId?: string;
  onTriggerTypeRegistrationFunctionId?: string;
}

/** What one worker connection may hold and do (docs/security.md#per-worker-limits). */
export interface WorkerLimits {
  maxRegistrations: number;
  maxCallsInFlight: number;
  /** 0: no limit. */
  maxFramesPerSecond: number;
  maxQueuedBytes: number;
  /** Channels from engine::channels::create one connection, and the whole listener, may hold open. */
  maxChannelsPerWorker: number;
  maxChannels: number;
}

export interface WorkersConfig {
  host: string;
  port: number;
  maxFrameBytes: number;
  /** Largest message on a channel socket of this listener. */
  maxChannelFrameBytes: number;
  /** What all channels of a process may hold together (the first entry's applies). */
  maxChannelBufferBytes: number;
  /** WebSockets (`/`, `/otel`) this listener holds in each process, authenticating ones included. */
  maxConnections: number;
  /** Of those, at most this many waiting for the auth function's answer. */
  maxUnauthenticatedConnections: number;
  /** What this listener's sockets may hold in unfinished messages, in each process. */
  maxPartialFrameBytes: number;
  /** What the engine may have queued towards this listener's workers, in each process. */
  maxListenerQueuedBytes: number;
  /** What the calls this listener's workers have in flight may hold, in each process. */
  maxListenerCallBytes: number;
  /** What this listener's workers may register together in each process (JSON); unset: only the process's budget. */
  maxListenerRegistrationBytes?: number;
  authToken?: string;
  /** iii's listener middleware: every call a worker on this listener makes goes to it instead. */
  middlewareFunctionId?: string;
  rbac?: RbacConfig;
  limits: WorkerLimits;
  /**
   * Further `iii-worker-manager` entries: listeners of their own (typically a public one with RBAC).
   * Only set on the first entry's config; theirs is empty. Reconnect grace is the first entry's.
   */
  extraListeners: readonly WorkersConfig[];
  /** How long requests wait for a departed worker's functions to come back; 0: no wait. */
  reconnectGraceMs: number;
  /** WebSocket ping period; 0 disables the heartbeat. */
  heartbeatIntervalMs: number;
  /** Silence after which a worker is dropped as frozen. */
  heartbeatTimeoutMs: number;
  /** How long a connection may take to send its upgrade request. */
  handshakeTimeoutMs: number;
}

/** iii-observability's settings as the file gave them (snake_case, iii's keys). */
export type ObservabilityConfig = Readonly<Record<string, unknown>> & {
  enabled?: boolean;
  service_name?: string;
  exporter?: 'otlp' | 'memory' | 'both' | 'none';
  endpoint?: string;
  sampling_ratio?: number;
};

/** Where HTTP-invoked functions may send requests (iii-http-functions `security`). */
export interface HttpFunctionsConfig {
  urlAllowlist: readonly string[];
  blockPrivateIps: boolean;
  requireHttps: boolean;
}

export interface ClusterConfig {
  processes: number;
  redisUrl?: string;
  /** CA (PEM path) that signed the Redis server certificate, for rediss:// URLs. */
  redisTlsCaFile?: string;
  /** Mutual TLS on TCP forward links: PEM paths. */
  forwardTls?: { certFile: string; keyFile: string; caFile: string };
  /** Key and channel prefix; peers of another cluster name are ignored. */
  name: string;
  nodeId?: string;
  advertiseHost?: string;
  forwardPort?: number;
  secret?: string;
  heartbeatMs: number;
  leaseMs: number;
  /** Node.js/V8 flags for the children, after the primary's own execArgv. */
  childNodeArgs: readonly string[];
  /** A child's V8 heap growing percent while a streamed upload or response moves at least 1 MiB a second; 0: never raised. */
  streamHeapGrowingPercent: number;
}

/** iii's other modules (docs/modules.md), by their names in the `workers:` list. */
export const III_MODULE_NAMES = ['iii-state', 'iii-stream', 'iii-pubsub', 'iii-cron', 'iii-queue'] as const;

export type IiiModuleName = (typeof III_MODULE_NAMES)[number];

/**
 * Their configs as the file gave them (snake_case, iii's keys), validated by src/config/modules/; a
 * module the file does not list is absent (and does not run).
 */
export type IiiModulesConfig = Readonly<Partial<Record<IiiModuleName, Readonly<Record<string, unknown>>>>>;

export interface EngineConfig {
  api: ApiConfig;
  admin: AdminConfig;
  workers: WorkersConfig;
  cluster: ClusterConfig;
  observability: ObservabilityConfig;
  httpFunctions: HttpFunctionsConfig;
  /** iii-state, iii-stream, iii-pubsub, iii-cron, iii-queue: those the file lists. */
  modules: IiiModulesConfig;
  /** Module classes present in the file that this engine does not implement; the caller warns. */
  skippedModules: readonly string[];
}
