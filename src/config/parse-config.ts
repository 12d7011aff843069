import { availableParallelism } from 'node:os';
import type { z } from 'zod';
import { ConfigError } from './config-error.js';
import type { ConfigIssue } from './config-error.js';
import { configErrorMap, joinPath, toConfigIssues, typeName } from './issues.js';
import {
  MODULE_CLASSES,
  adminModuleSchema,
  clusterModuleSchema,
  restApiModuleSchema,
  topLevelSchema,
  workerModuleSchema,
} from './schema.js';
import type { AdminModuleInput, ClusterModuleInput, ModuleKey, RestApiModuleInput, WorkerModuleInput } from './schema.js';
import type { AdminConfig, ApiConfig, ClusterConfig, EngineConfig, WorkersConfig } from './types.js';

type PlainObject = Record<string, unknown>;

function isPlainObject(value: unknown): value is PlainObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

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
}

/**
 * Validates an already parsed config document (the iii format) and returns the frozen `EngineConfig`.
 * Every problem is collected before throwing, so one `ConfigError` lists them all.
 */
export function parseConfig(input: unknown): EngineConfig {
  const root = withoutNulls(input);
  if (!isPlainObject(root)) {
    throw new ConfigError('CONFIG_INVALID', [
      { path: '(root)', message: `expected an object with the keys port and modules, got ${typeName(root)}` },
    ]);
  }

  const issues: ConfigIssue[] = [];
  const rawModules: unknown[] = Array.isArray(root.modules) ? root.modules : [];
  const classAt = (index: number): string | undefined => {
    const entry = rawModules[index];
    return isPlainObject(entry) && typeof entry.class === 'string' && entry.class !== '' ? entry.class : undefined;
  };
  const entryPath = (index: number): string => {
    const moduleClass = classAt(index);
    return moduleClass === undefined ? `modules[${index}]` : `modules[${index}](${moduleClass})`;
  };

  const top = topLevelSchema.safeParse(root, { error: configErrorMap });
  if (!top.success) {
    issues.push(
      ...toConfigIssues(top.error, topLevelSchema, (segments) => {
        const [first, index, ...rest] = segments;
        return first === 'modules' && typeof index === 'number' ? joinPath(entryPath(index), rest) : joinPath('', segments);
      }),
    );
  }

  const modules: ModuleInputs = {};
  const firstIndex = new Map<ModuleKey, number>();
  const skippedModules: string[] = [];
  rawModules.forEach((entry, index) => {
    const moduleClass = classAt(index);
    // A missing or non-string class has already been reported by the top-level schema.
    if (!isPlainObject(entry) || moduleClass === undefined) return;
    const key = CLASS_TO_KEY.get(moduleClass);
    if (key === undefined) {
      if (!skippedModules.includes(moduleClass)) skippedModules.push(moduleClass);
      return;
    }
    const first = firstIndex.get(key);
    if (first !== undefined) {
      issues.push({ path: entryPath(index), message: `duplicate module; ${moduleClass} is already configured at ${entryPath(first)}` });
      return;
    }
    firstIndex.set(key, index);
    const prefix = `${entryPath(index)}.config`;
    const config = entry.config ?? {};
    // A config that is not an object has already been reported by the top-level schema.
    if (!isPlainObject(config)) return;
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
    }
  });

  const workersIndex = firstIndex.get('workers');
  if (top.success && root.port !== undefined && modules.workers?.port !== undefined && workersIndex !== undefined) {
    if (modules.workers.port !== top.data.port) {
      issues.push({
        path: `${entryPath(workersIndex)}.config.port`,
        message: `is ${modules.workers.port} but the top-level port is ${top.data.port}; set the worker port in only one place, or the same value in both`,
      });
    }
  }

  if (issues.length > 0 || !top.success) throw new ConfigError('CONFIG_INVALID', issues);

  return deepFreeze({
    api: toApiConfig(modules.api ?? restApiModuleSchema.parse({})),
    admin: toAdminConfig(modules.admin ?? adminModuleSchema.parse({})),
    workers: toWorkersConfig(modules.workers ?? workerModuleSchema.parse({}), top.data.port),
    cluster: toClusterConfig(modules.cluster ?? clusterModuleSchema.parse({})),
    skippedModules,
  });
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
  return {
    host: workers.host,
    port: workers.port ?? topLevelPort,
    maxFrameBytes: workers.max_frame_bytes,
    reconnectGraceMs: workers.reconnect_grace_ms,
    heartbeatIntervalMs: workers.heartbeat_interval_ms,
    heartbeatTimeoutMs: workers.heartbeat_timeout_ms,
    ...(workers.auth_token === undefined ? {} : { authToken: workers.auth_token }),
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
    name: cluster.name,
    ...nonEmpty('nodeId', cluster.node_id),
    ...nonEmpty('advertiseHost', cluster.advertise_host),
    ...(cluster.forward_port === undefined ? {} : { forwardPort: cluster.forward_port }),
    ...nonEmpty('secret', cluster.secret),
    heartbeatMs: cluster.heartbeat_ms,
    leaseMs: cluster.lease_ms,
    childNodeArgs: cluster.child_node_args,
  };
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
