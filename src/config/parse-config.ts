import { availableParallelism } from 'node:os';
import type { z } from 'zod';
import { ConfigError } from './config-error.js';
import type { ConfigIssue } from './config-error.js';
import { configErrorMap, joinPath, toConfigIssues, typeName } from './issues.js';
import {
  BUILT_IN_NAMES,
  MODULE_CLASSES,
  MODULE_NAMES,
  MODULE_NAME_ALIASES,
  adminModuleSchema,
  clusterModuleSchema,
  httpFunctionsModuleSchema,
  observabilityModuleSchema,
  restApiModuleSchema,
  topLevelSchema,
  workerModuleSchema,
  MATCH_PATTERN,
  listenerDefaults,
} from './schema.js';
import type {
  AdminModuleInput,
  ClusterModuleInput,
  HttpFunctionsModuleInput,
  ModuleKey,
  ObservabilityModuleInput,
  RestApiModuleInput,
  WorkerModuleInput,
} from './schema.js';
import type { AdminConfig, ApiConfig, ClusterConfig, EngineConfig, FunctionFilter, HttpFunctionsConfig, IiiModuleName, ObservabilityConfig, RbacConfig, WorkersConfig } from './types.js';
import { III_MODULE_SCHEMAS } from './modules/iii-module-schemas.js';
import { isPlainObject } from '../values.js';
import { isOtherIiiModule, suggestModuleId } from './module-suggestion.js';

type PlainObject = Record<string, unknown>;


/**
 * A key whose value is null counts as absent, so `redis_url: ${REDIS_URL:}` (which YAML reads as null)
 * and `config:` left empty both mean "use the default" instead of failing a type check.
 */
function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (!isPlainObject(value)) return value;
  // fromEntries defines own properties, so a `__proto__` key stays a key (and is reported as unknown).
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, entry]) => entry !== null)
      .map(([key, entry]) => [key, withoutNulls(entry)]),
  );
}

const CLASS_TO_KEY = new Map<string, ModuleKey>(
  Object.entries(MODULE_CLASSES).map(([key, moduleClass]) => [moduleClass, key as ModuleKey]),
);
const NAME_TO_KEY = new Map<string, ModuleKey>(Object.entries(MODULE_NAMES).map(([key, name]) => [name, key as ModuleKey]));

function validate<S extends z.ZodType>(schema: S, raw: unknown, prefix: string, issues: ConfigIssue[]): z.output<S> | undefined {
  const result = schema.safeParse(raw, { error: configErrorMap });
  if (result.success) return result.data;
  issues.push(...toConfigIssues(result.error, schema, (segments) => joinPath(prefix, segments)));
  return undefined;
}

interface ModuleInputs {
  api?: RestApiModuleInput;
  admin?: AdminModuleInput;
  workers?: WorkerModuleInput;
  cluster?: ClusterModuleInput;
  observability?: ObservabilityModuleInput;
  httpFunctions?: HttpFunctionsModuleInput;
}

/**
 * Validates an already parsed config document (the iii format) and returns the frozen `EngineConfig`.
 * Every problem is collected before throwing, so one `ConfigError` lists them all.
 */
export function parseConfig(input: unknown): EngineConfig {
  const root = withoutNulls(input);
  if (!isPlainObject(root)) {
    throw new ConfigError('CONFIG_INVALID', [
      { path: '(root)', message: `expected an object with the keys workers (or modules) and port, got ${typeName(root)}` },
    ]);
  }

  const issues: ConfigIssue[] = [];
  const entries = [...moduleEntries(root, 'workers'), ...moduleEntries(root, 'modules')];
  const labelOf = (list: EntryList, index: number): string => entries.find((e) => e.list === list && e.index === index)?.label ?? `${list}[${index}]`;

  const top = topLevelSchema.safeParse(root, { error: configErrorMap });
  if (!top.success) {
    issues.push(
      ...toConfigIssues(top.error, topLevelSchema, (segments) => {
        const [first, index, ...rest] = segments;
        return (first === 'modules' || first === 'workers') && typeof index === 'number'
          ? joinPath(labelOf(first, index), rest)
          : joinPath('', segments);
      }),
    );
  }

  const modules: ModuleInputs = {};
  const firstAt = new Map<ModuleKey, ModuleEntry>();
  const skippedModules: string[] = [];
  const extraWorkers: { entry: ModuleEntry; input: WorkerModuleInput }[] = [];
  const iiiModules: Partial<Record<IiiModuleName, Record<string, unknown>>> = {};
  const iiiModuleAt = new Map<IiiModuleName, string>();
  const skip = (what: string): void => {
    if (!skippedModules.includes(what)) skippedModules.push(what);
  };
  for (const entry of entries) {
    const { moduleClass, name, raw, label } = entry;
    if (moduleClass !== undefined && name !== undefined) {
      issues.push({ path: label, message: 'has both class and name; set one of them' });
      continue;
    }
    // A missing or non-string name or class has already been reported by the top-level schema.
    const id = name ?? moduleClass;
    if (id === undefined) {
      if (entry.list === 'modules' && raw.class === undefined && raw.name === undefined) issues.push({ path: label, message: 'needs a class or a name' });
      continue;
    }
    if (name !== undefined && BUILT_IN_NAMES.includes(name)) continue;
    if (typeof raw.image === 'string') {
      skip(`${id} (image ${raw.image})`);
      continue;
    }
    if (name !== undefined && Object.hasOwn(III_MODULE_SCHEMAS, name)) {
      // iii's other modules (docs/modules.md): validated by their own schema, run by src/modules/.
      const moduleName = name as IiiModuleName;
      const first = iiiModuleAt.get(moduleName);
      if (first !== undefined) {
        issues.push({ path: label, message: `${moduleName} is configured twice (also ${first}); keep one entry` });
        continue;
      }
      iiiModuleAt.set(moduleName, label);
      const config = raw.config ?? {};
      if (!isPlainObject(config)) continue;
      const input = validate(III_MODULE_SCHEMAS[moduleName], config, `${label}.config`, issues);
      if (input !== undefined) iiiModules[moduleName] = input;
      continue;
    }
    const key = moduleClass !== undefined ? CLASS_TO_KEY.get(moduleClass) : (NAME_TO_KEY.get(id) ?? MODULE_NAME_ALIASES[id]);
    if (key === undefined) {
      const near = isOtherIiiModule(id) ? undefined : suggestModuleId(id);
      // A near miss of a known name is a typo: starting on defaults without that module would hide it.
      if (near !== undefined) issues.push({ path: `${label}.${name === undefined ? 'class' : 'name'}`, message: `unknown module "${id}"; did you mean "${near}"?` });
      else skip(id);
      continue;
    }
    const first = firstAt.get(key);
    if (first !== undefined && key === 'workers' && entry.name !== undefined) {
      // iii: every further iii-worker-manager entry is a listener of its own (typically RBAC).
      const config = raw.config ?? {};
      if (!isPlainObject(config)) continue;
      const listener = validate(workerModuleSchema, config, `${label}.config`, issues);
      if (listener !== undefined) extraWorkers.push({ entry, input: listener });
      continue;
    }
    if (first !== undefined) {
      issues.push({ path: label, message: duplicateMessage(key, entry, first) });
      continue;
    }
    firstAt.set(key, entry);
    const prefix = `${label}.config`;
    const config = raw.config ?? {};
    // A config that is not an object has already been reported by the top-level schema.
    if (!isPlainObject(config)) continue;
    switch (key) {
      case 'api':
        modules.api = validate(restApiModuleSchema, config, prefix, issues);
        break;
      case 'admin':
        modules.admin = validate(adminModuleSchema, config, prefix, issues);
        break;
      case 'workers':
        modules.workers = validate(workerModuleSchema, config, prefix, issues);
        break;
      case 'cluster':
        modules.cluster = validate(clusterModuleSchema, config, prefix, issues);
        break;
      case 'observability':
        modules.observability = validate(observabilityModuleSchema, config, prefix, issues);
        break;
      case 'httpFunctions':
        modules.httpFunctions = validate(httpFunctionsModuleSchema, config, prefix, issues);
        break;
    }
  }

  const workersEntry = firstAt.get('workers');
  if (top.success && root.port !== undefined && modules.workers?.port !== undefined && workersEntry !== undefined) {
    if (modules.workers.port !== top.data.port) {
      issues.push({
        path: `${workersEntry.label}.config.port`,
        message: `is ${modules.workers.port} but the top-level port is ${top.data.port}; set the worker port in only one place, or the same value in both`,
      });
    }
  }

  const mainWorkerPort = modules.workers?.port ?? (top.success ? top.data.port : undefined);
  const takenPorts = new Map<number, string>();
  if (mainWorkerPort !== undefined) takenPorts.set(mainWorkerPort, workersEntry?.label ?? 'the main worker listener');
  for (const { entry, input } of extraWorkers) {
    if (input.port === undefined || input.port === 0) {
      issues.push({ path: `${entry.label}.config.port`, message: 'is required for a further worker listener (a port of its own)' });
      continue;
    }
    const holder = takenPorts.get(input.port);
    if (holder !== undefined) issues.push({ path: `${entry.label}.config.port`, message: `is ${input.port}, already used by ${holder}` });
    else takenPorts.set(input.port, entry.label);
  }

  if (issues.length > 0 || !top.success) throw new ConfigError('CONFIG_INVALID', issues);

  return deepFreeze({
    api: toApiConfig(modules.api ?? restApiModuleSchema.parse({})),
    admin: toAdminConfig(modules.admin ?? adminModuleSchema.parse({})),
    workers: {
      ...toWorkersConfig(modules.workers ?? workerModuleSchema.parse({}), top.data.port),
      extraListeners: extraWorkers.map(({ input }) => toWorkersConfig(input, top.data.port)),
    },
    cluster: toClusterConfig(modules.cluster ?? clusterModuleSchema.parse({})),
    observability: toObservabilityConfig(modules.observability ?? observabilityModuleSchema.parse({})),
    httpFunctions: toHttpFunctionsConfig(modules.httpFunctions ?? httpFunctionsModuleSchema.parse({})),
    modules: iiiModules,
    skippedModules,
  });
}

type EntryList = 'workers' | 'modules';

interface ModuleEntry {
  list: EntryList;
  index: number;
  /** Where problems are reported: `workers[2](iii-http)`. */
  label: string;
  name?: string;
  moduleClass?: string;
  raw: PlainObject;
}

function moduleEntries(root: PlainObject, list: EntryList): ModuleEntry[] {
  const items: unknown[] = Array.isArray(root[list]) ? (root[list] as unknown[]) : [];
  const out: ModuleEntry[] = [];
  items.forEach((raw, index) => {
    if (!isPlainObject(raw)) return;
    const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
    const name = text(raw.name);
    const moduleClass = list === 'modules' ? text(raw.class) : undefined;
    const id = name ?? moduleClass;
    out.push({
      list,
      index,
      label: id === undefined ? `${list}[${index}]` : `${list}[${index}](${id})`,
      ...(name === undefined ? {} : { name }),
      ...(moduleClass === undefined ? {} : { moduleClass }),
      raw,
    });
  });
  return out;
}

function duplicateMessage(key: ModuleKey, entry: ModuleEntry, first: ModuleEntry): string {
  const id = entry.name ?? entry.moduleClass ?? '';
  const firstId = first.name ?? first.moduleClass ?? '';
  if (key === 'api' && entry.name !== undefined && first.name !== undefined && firstId !== id) {
    const deprecated = id === MODULE_NAMES.api ? id : firstId;
    const replacement = id === MODULE_NAMES.api ? firstId : id;
    return `'${deprecated}' is the older name for '${replacement}' and both are present; remove '${deprecated}' (as iii 0.22.1 requires)`;
  }
  return `duplicate module; ${id} is already configured at ${first.label}`;
}


/** The configuration used when there is no config file. */
export function defaultConfig(): EngineConfig {
  return parseConfig({});
}

function toApiConfig(api: RestApiModuleInput): ApiConfig {
  return {
    port: api.port,
    host: api.host,
    defaultTimeoutMs: api.default_timeout,
    concurrencyRequestLimit: api.concurrency_request_limit,
    concurrencyQueueLimit: api.concurrency_queue_limit,
    ...(api.cors === undefined
      ? {}
      : {
          cors: {
            allowedOrigins: [...api.cors.allowed_origins],
            allowedMethods: api.cors.allowed_methods.map((method) => method.toUpperCase()),
          },
        }),
    bodyLimitBytes: api.body_limit,
    streamBodyLimitBytes: api.stream_body_limit,
    trustProxy: api.trust_proxy,
    // Node lower-cases incoming header names, so lookups by this name only work lower-cased.
    requestIdHeader: api.request_id_header.toLowerCase(),
    ignoreTrailingSlash: api.ignore_trailing_slash,
    ...(api.not_found_function === undefined ? {} : { notFoundFunction: api.not_found_function }),
    middleware: api.middleware.map((entry) => ({ functionId: entry.function_id, phase: entry.phase, priority: entry.priority })),
  };
}

function toAdminConfig(admin: AdminModuleInput): AdminConfig {
  return { host: admin.host, port: admin.port };
}

function toWorkersConfig(workers: WorkerModuleInput, topLevelPort: number): WorkersConfig {
  const defaults = listenerDefaults(workers.rbac !== undefined);
  const maxQueuedBytes = workers.max_queued_bytes ?? defaults.maxQueuedBytes;
  const maxListenerRegistrationBytes = workers.max_listener_registration_bytes ?? defaults.maxListenerRegistrationBytes;
  return {
    host: workers.host,
    port: workers.port ?? topLevelPort,
    maxFrameBytes: workers.max_frame_bytes,
    maxConnections: workers.max_connections ?? defaults.maxConnections,
    maxUnauthenticatedConnections: workers.max_unauthenticated_connections,
    // Unset: room for two of the listener's largest frames, for one worker's largest queue, and for
    // four of its largest calls (one on a listener with rbac).
    maxPartialFrameBytes: workers.max_partial_frame_bytes ?? 2 * workers.max_frame_bytes,
    maxListenerQueuedBytes: workers.max_listener_queued_bytes ?? maxQueuedBytes,
    maxListenerCallBytes: workers.max_listener_call_bytes ?? defaults.listenerCallFrames * workers.max_frame_bytes,
    ...(maxListenerRegistrationBytes === undefined ? {} : { maxListenerRegistrationBytes }),
    maxChannelFrameBytes: workers.max_channel_frame_bytes,
    maxChannelBufferBytes: workers.max_channel_buffer_bytes,
    reconnectGraceMs: workers.reconnect_grace_ms,
    heartbeatIntervalMs: workers.heartbeat_interval_ms,
    heartbeatTimeoutMs: workers.heartbeat_timeout_ms,
    handshakeTimeoutMs: workers.handshake_timeout_ms,
    ...(workers.auth_token === undefined ? {} : { authToken: workers.auth_token }),
    ...(workers.middleware_function_id === undefined ? {} : { middlewareFunctionId: workers.middleware_function_id }),
    ...(workers.rbac === undefined ? {} : { rbac: toRbacConfig(workers.rbac) }),
    limits: {
      maxRegistrations: workers.max_registrations,
      maxCallsInFlight: workers.max_calls_in_flight,
      maxFramesPerSecond: workers.max_frames_per_second,
      maxQueuedBytes,
      maxChannelsPerWorker: workers.max_channels_per_worker,
      maxChannels: workers.max_channels ?? defaults.maxChannels,
    },
    extraListeners: [],
  };
}

/** `match("p")` → p; the schema has checked the form. */
function matchPattern(text: string): string | undefined {
  const found = MATCH_PATTERN.exec(text);
  return found === null ? undefined : (found[1] ?? found[2] ?? '');
}

function toRbacConfig(rbac: NonNullable<WorkerModuleInput['rbac']>): RbacConfig {
  const exposeFunctions: FunctionFilter[] = rbac.expose_functions.map((filter) => {
    if (typeof filter === 'string') return { match: matchPattern(filter) ?? filter };
    const metadata: Record<string, { equals: unknown } | { match: string }> = {};
    for (const [key, value] of Object.entries(filter.metadata)) {
      const pattern = typeof value === 'string' ? matchPattern(value) : undefined;
      metadata[key] = pattern === undefined ? { equals: value } : { match: pattern };
    }
    return { metadata };
  });
  return {
    exposeFunctions,
    ...(rbac.auth_function_id === undefined ? {} : { authFunctionId: rbac.auth_function_id }),
    ...(rbac.on_function_registration_function_id === undefined ? {} : { onFunctionRegistrationFunctionId: rbac.on_function_registration_function_id }),
    ...(rbac.on_trigger_registration_function_id === undefined ? {} : { onTriggerRegistrationFunctionId: rbac.on_trigger_registration_function_id }),
    ...(rbac.on_trigger_type_registration_function_id === undefined
      ? {}
      : { onTriggerTypeRegistrationFunctionId: rbac.on_trigger_type_registration_function_id }),
  };
}

/** Empty strings mean unset for the cluster's strings, so `${VAR:}` works quoted or not. */
function nonEmpty<K extends string>(key: K, value: string | undefined): { [P in K]?: string } {
  return value === undefined || value === '' ? {} : ({ [key]: value } as { [P in K]?: string });
}

function toClusterConfig(cluster: ClusterModuleInput): ClusterConfig {
  return {
    // Resolved here, not in the schema, so the generated documentation is the same on every machine.
    processes: cluster.processes ?? availableParallelism(),
    ...nonEmpty('redisUrl', cluster.redis_url),
    ...nonEmpty('redisTlsCaFile', cluster.redis_tls_ca_file),
    ...(cluster.forward_tls === undefined
      ? {}
      : { forwardTls: { certFile: cluster.forward_tls.cert_file, keyFile: cluster.forward_tls.key_file, caFile: cluster.forward_tls.ca_file } }),
    name: cluster.name,
    ...nonEmpty('nodeId', cluster.node_id),
    ...nonEmpty('advertiseHost', cluster.advertise_host),
    ...(cluster.forward_port === undefined ? {} : { forwardPort: cluster.forward_port }),
    ...nonEmpty('secret', cluster.secret),
    heartbeatMs: cluster.heartbeat_ms,
    leaseMs: cluster.lease_ms,
    childNodeArgs: cluster.child_node_args,
    streamHeapGrowingPercent: cluster.stream_heap_growing_percent,
  };
}

function toObservabilityConfig(observability: ObservabilityModuleInput): ObservabilityConfig {
  // Kept as read (iii's keys): the tracing work consumes it; nothing here changes behaviour yet.
  return { ...observability };
}

function toHttpFunctionsConfig(httpFunctions: HttpFunctionsModuleInput): HttpFunctionsConfig {
  const { url_allowlist: allowlist, block_private_ips: blockPrivateIps, require_https: requireHttps } = httpFunctions.security;
  // As in iii 0.22.1 (docs/compatibility.md): an empty allowlist means every host.
  return { urlAllowlist: allowlist.length === 0 ? ['*'] : [...allowlist], blockPrivateIps, requireHttps };
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
