import { availableParallelism } from 'node:os';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { substituteEnv } from '../../src/config/env.js';
import { ConfigError, defaultConfig, loadConfigFile, loadConfigText, parseConfig } from '../../src/config/load.js';
import type { ConfigIssue } from '../../src/config/load.js';
import type { EngineConfig } from '../../src/config/types.js';

const API = 'modules::api::RestApiModule';
const ADMIN = 'modules::admin::AdminModule';
const WORKERS = 'modules::workers::WorkerModule';
const CLUSTER = 'modules::cluster::ClusterModule';

const apiPath = (index = 0) => `modules[${index}](${API})`;

function configError(run: () => unknown): ConfigError {
  try {
    run();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError, nothing was thrown');
}

function issuesOf(input: unknown): ConfigIssue[] {
  return configError(() => parseConfig(input)).issues;
}

function withModule(moduleClass: string, config: unknown): unknown {
  return { modules: [{ class: moduleClass, config }] };
}

const DEFAULTS: EngineConfig = {
  api: {
    port: 3111,
    host: '0.0.0.0',
    defaultTimeoutMs: 30000,
    concurrencyRequestLimit: 1024,
    concurrencyQueueLimit: 1024,
    bodyLimitBytes: 1048576,
    streamBodyLimitBytes: 0,
    trustProxy: false,
    requestIdHeader: 'x-request-id',
    ignoreTrailingSlash: false,
    middleware: [],
  },
  admin: { host: '127.0.0.1', port: 9464 },
  workers: {
    host: '0.0.0.0',
    port: 49134,
    maxFrameBytes: 16777216,
    maxConnections: 1024,
    maxUnauthenticatedConnections: 64,
    maxPartialFrameBytes: 33554432,
    maxListenerQueuedBytes: 67108864,
    maxListenerCallBytes: 67108864,
    maxChannelFrameBytes: 262144,
    maxChannelBufferBytes: 67108864,
    reconnectGraceMs: 5000,
    heartbeatIntervalMs: 2000,
    heartbeatTimeoutMs: 5000,
    handshakeTimeoutMs: 10000,
    limits: { maxRegistrations: 100000, maxCallsInFlight: 1000, maxFramesPerSecond: 100000, maxQueuedBytes: 67108864, maxChannelsPerWorker: 64, maxChannels: 256 },
    extraListeners: [],
  },
  cluster: {
    processes: availableParallelism(),
    name: 'switchyard',
    heartbeatMs: 1000,
    leaseMs: 5000,
    childNodeArgs: ['--heap-growing-percent=50', '--min-semi-space-size=16', '--max-semi-space-size=16'],
    streamHeapGrowingPercent: 200,
  },
  observability: {},
  httpFunctions: { urlAllowlist: ['*'], blockPrivateIps: true, requireHttps: true },
  modules: {},
  skippedModules: [],
};

describe('defaults', () => {
  it('defaultConfig() has every documented default and no unset optional keys', () => {
    const config = defaultConfig();
    expect(config).toStrictEqual(DEFAULTS);
    expect(Object.keys(config.api)).not.toContain('cors');
    expect(Object.keys(config.api)).not.toContain('notFoundFunction');
    expect(Object.keys(config.workers)).not.toContain('authToken');
    expect(Object.keys(config.cluster)).toEqual(['processes', 'name', 'heartbeatMs', 'leaseMs', 'childNodeArgs', 'streamHeapGrowingPercent']);
  });

  it('an empty object, empty module list and null module config all give the defaults', () => {
    expect(parseConfig({})).toStrictEqual(DEFAULTS);
    expect(parseConfig({ modules: [] })).toStrictEqual(DEFAULTS);
    expect(parseConfig({ port: null, modules: null })).toStrictEqual(DEFAULTS);
    expect(
      parseConfig({ modules: [{ class: API, config: null }, { class: ADMIN }, { class: WORKERS, config: {} }, { class: CLUSTER }] }),
    ).toStrictEqual(DEFAULTS);
  });

  it('an empty YAML file gives the defaults', () => {
    expect(loadConfigText('', 'yaml', {})).toStrictEqual(DEFAULTS);
    expect(loadConfigText('# nothing configured yet\n', 'yaml', {})).toStrictEqual(DEFAULTS);
  });

  it('a document that is not an object is rejected', () => {
    expect(issuesOf([])).toEqual([{ path: '(root)', message: 'expected an object with the keys workers (or modules) and port, got array' }]);
    expect(issuesOf('port: 1')).toEqual([{ path: '(root)', message: 'expected an object with the keys workers (or modules) and port, got string' }]);
    expect(configError(() => loadConfigText('42', 'yaml', {})).issues).toEqual([
      { path: '(root)', message: 'expected an object with the keys workers (or modules) and port, got number' },
    ]);
  });
});

describe('RestApiModule', () => {
  it('accepts every field and maps it to camelCase', () => {
    const config = parseConfig(
      withModule(API, {
        port: 8080,
        host: '127.0.0.1',
        default_timeout: 5000,
        concurrency_request_limit: 10,
        concurrency_queue_limit: 0,
        cors: { allowed_origins: ['https://app.example.com', '*'], allowed_methods: ['get', 'Post', 'DELETE'] },
        body_limit: 0,
        stream_body_limit: 1073741824,
        trust_proxy: true,
        request_id_header: 'X-Correlation-ID',
        ignore_trailing_slash: true,
        not_found_function: 'fallback::handler',
        middleware: [
          { function_id: 'auth', phase: 'onRequest', priority: -5 },
          { function_id: 'log', phase: 'onResponse' },
          { function_id: 'timing', phase: 'onTimeout', priority: 2.5 },
        ],
      }),
    );
    expect(config.api).toStrictEqual({
      port: 8080,
      host: '127.0.0.1',
      defaultTimeoutMs: 5000,
      concurrencyRequestLimit: 10,
      concurrencyQueueLimit: 0,
      cors: { allowedOrigins: ['https://app.example.com', '*'], allowedMethods: ['GET', 'POST', 'DELETE'] },
      bodyLimitBytes: 0,
      streamBodyLimitBytes: 1073741824,
      trustProxy: true,
      requestIdHeader: 'x-correlation-id',
      ignoreTrailingSlash: true,
      notFoundFunction: 'fallback::handler',
      middleware: [
        { functionId: 'auth', phase: 'onRequest', priority: -5 },
        { functionId: 'log', phase: 'onResponse', priority: 0 },
        { functionId: 'timing', phase: 'onTimeout', priority: 2.5 },
      ],
    });
    expect(config.admin).toStrictEqual(DEFAULTS.admin);
    expect(config.workers).toStrictEqual(DEFAULTS.workers);
  });

  it('accepts port 0 (ephemeral) and the bounds themselves', () => {
    const config = parseConfig(withModule(API, { port: 0, default_timeout: 2147483647, concurrency_request_limit: 1 }));
    expect(config.api.port).toBe(0);
    expect(config.api.defaultTimeoutMs).toBe(2147483647);
    expect(config.api.concurrencyRequestLimit).toBe(1);
    expect(parseConfig(withModule(API, { port: 65535 })).api.port).toBe(65535);
  });

  it('accepts cors with empty lists', () => {
    expect(parseConfig(withModule(API, { cors: { allowed_origins: [], allowed_methods: [] } })).api.cors).toStrictEqual({
      allowedOrigins: [],
      allowedMethods: [],
    });
  });

  const PHASES = '"onRequest", "preHandler", "postHandler", "onResponse", "onError", "onTimeout"';
  const invalid: [string, Record<string, unknown>, string, string][] = [
    ['port above range', { port: 65536 }, 'port', 'must be at most 65535'],
    ['negative port', { port: -1 }, 'port', 'must be at least 0'],
    ['port as text', { port: 'http' }, 'port', 'expected an integer, got string'],
    ['quoted port', { port: '3111' }, 'port', 'expected an integer, got the string "3111" (write numbers without quotes)'],
    ['fractional port', { port: 80.5 }, 'port', 'expected an integer, got 80.5'],
    ['empty host', { host: '' }, 'host', 'must not be empty'],
    ['host as number', { host: 127 }, 'host', 'expected a string, got 127'],
    ['zero timeout', { default_timeout: 0 }, 'default_timeout', 'must be at least 1'],
    ['timeout beyond timers', { default_timeout: 2147483648 }, 'default_timeout', 'must be at most 2147483647'],
    ['zero concurrency', { concurrency_request_limit: 0 }, 'concurrency_request_limit', 'must be at least 1'],
    ['negative body limit', { body_limit: -1 }, 'body_limit', 'must be at least 0'],
    ['body limit as text', { body_limit: '1mb' }, 'body_limit', 'expected an integer, got string'],
    ['trust_proxy as text', { trust_proxy: 'yes' }, 'trust_proxy', 'expected a boolean (true or false), got string'],
    ['header with a space', { request_id_header: 'x request id' }, 'request_id_header', 'must be a valid HTTP header name'],
    ['empty header', { request_id_header: '' }, 'request_id_header', 'must be a valid HTTP header name'],
    ['ignore_trailing_slash as number', { ignore_trailing_slash: 1 }, 'ignore_trailing_slash', 'expected a boolean (true or false), got 1'],
    ['empty not_found_function', { not_found_function: '' }, 'not_found_function', 'must not be empty'],
    ['cors as text', { cors: '*' }, 'cors', 'expected an object, got string'],
    ['cors origins as text', { cors: { allowed_origins: '*', allowed_methods: [] } }, 'cors.allowed_origins', 'expected a list, got string'],
    ['empty cors origin', { cors: { allowed_origins: [''], allowed_methods: [] } }, 'cors.allowed_origins[0]', 'must not be empty'],
    ['bad cors method', { cors: { allowed_origins: [], allowed_methods: ['GET', 'NOT A METHOD'] } }, 'cors.allowed_methods[1]', 'must be an HTTP method name'],
    ['middleware as object', { middleware: {} }, 'middleware', 'expected a list, got object'],
    ['middleware without function', { middleware: [{ phase: 'onRequest' }] }, 'middleware[0].function_id', 'is required'],
    ['middleware with unknown phase', { middleware: [{ function_id: 'a', phase: 'beforeAll' }] }, 'middleware[0].phase', `must be one of ${PHASES}`],
    ['middleware priority as text', { middleware: [{ function_id: 'a', phase: 'onError', priority: 'high' }] }, 'middleware[0].priority', 'expected a number, got string'],
  ];

  it.each(invalid)('reports %s with its path', (_name, config, key, message) => {
    expect(issuesOf(withModule(API, config))).toEqual([{ path: `${apiPath()}.config.${key}`, message }]);
  });

  it('rejects a non-finite priority', () => {
    const yaml = `modules:\n  - class: ${API}\n    config:\n      middleware:\n        - { function_id: a, phase: onRequest, priority: .inf }\n`;
    expect(configError(() => loadConfigText(yaml, 'yaml', {})).issues).toEqual([
      { path: `${apiPath()}.config.middleware[0].priority`, message: 'expected a number, got Infinity' },
    ]);
  });

  it('rejects a config that is not an object', () => {
    expect(issuesOf(withModule(API, [1]))).toEqual([{ path: `${apiPath()}.config`, message: 'expected an object, got array' }]);
  });
});

describe('other modules', () => {
  it('maps AdminModule and WorkerModule fields', () => {
    const config = parseConfig({
      modules: [
        { class: ADMIN, config: { host: '0.0.0.0', port: 0 } },
        {
          class: WORKERS,
          config: {
            host: '127.0.0.1',
            port: 0,
            max_frame_bytes: 1024,
            max_connections: 10,
            max_unauthenticated_connections: 3,
            max_partial_frame_bytes: 2097152,
            max_listener_queued_bytes: 200000000,
            max_listener_call_bytes: 4096,
            max_channels_per_worker: 8,
            max_channels: 32,
            max_channel_frame_bytes: 65536,
            max_channel_buffer_bytes: 4194304,
            auth_token: 's3cret',
            reconnect_grace_ms: 0,
            heartbeat_interval_ms: 250,
            heartbeat_timeout_ms: 1000,
          },
        },
      ],
    });
    expect(config.admin).toStrictEqual({ host: '0.0.0.0', port: 0 });
    expect(config.workers).toStrictEqual({
      host: '127.0.0.1',
      port: 0,
      maxFrameBytes: 1024,
      maxConnections: 10,
      maxUnauthenticatedConnections: 3,
      maxPartialFrameBytes: 2097152,
      maxListenerQueuedBytes: 200000000,
      maxListenerCallBytes: 4096,
      maxChannelFrameBytes: 65536,
      maxChannelBufferBytes: 4194304,
      authToken: 's3cret',
      reconnectGraceMs: 0,
      heartbeatIntervalMs: 250,
      heartbeatTimeoutMs: 1000,
      handshakeTimeoutMs: 10000,
      limits: { maxRegistrations: 100000, maxCallsInFlight: 1000, maxFramesPerSecond: 100000, maxQueuedBytes: 67108864, maxChannelsPerWorker: 8, maxChannels: 32 },
      extraListeners: [],
    });
  });

  it('refuses a heartbeat timeout not greater than its interval, unless the heartbeat is off', () => {
    expect(() => parseConfig(withModule(WORKERS, { heartbeat_interval_ms: 2000, heartbeat_timeout_ms: 2000 }))).toThrow(
      /heartbeat_timeout_ms.*must be greater than heartbeat_interval_ms/,
    );
    expect(parseConfig(withModule(WORKERS, { heartbeat_interval_ms: 0, heartbeat_timeout_ms: 100 })).workers.heartbeatIntervalMs).toBe(0);
  });

  it('maps ClusterModule fields, empty strings meaning unset', () => {
    const config = parseConfig(
      withModule(CLUSTER, {
        processes: 1,
        redis_url: '',
        node_id: 'host-a',
        advertise_host: '10.0.0.5',
        forward_port: 0,
        secret: 'shared',
        heartbeat_ms: 250,
        lease_ms: 251,
        child_node_args: ['--max-old-space-size=512'],
        stream_heap_growing_percent: 0,
      }),
    );
    expect(config.cluster).toStrictEqual({
      processes: 1,
      name: 'switchyard',
      nodeId: 'host-a',
      advertiseHost: '10.0.0.5',
      forwardPort: 0,
      secret: 'shared',
      heartbeatMs: 250,
      leaseMs: 251,
      childNodeArgs: ['--max-old-space-size=512'],
      streamHeapGrowingPercent: 0,
    });
    expect(parseConfig(withModule(CLUSTER, { child_node_args: [] })).cluster.childNodeArgs).toEqual([]);
    expect(parseConfig(withModule(CLUSTER, { node_id: '', secret: '' })).cluster).toStrictEqual(DEFAULTS.cluster);
  });

  const invalid: [string, string, Record<string, unknown>, string, string][] = [
    ['admin port', ADMIN, { port: 99999 }, 'port', 'must be at most 65535'],
    ['admin host', ADMIN, { host: '' }, 'host', 'must not be empty'],
    ['worker frame size', WORKERS, { max_frame_bytes: 1023 }, 'max_frame_bytes', 'must be at least 1024'],
    ['empty worker token', WORKERS, { auth_token: '' }, 'auth_token', 'must not be empty'],
    ['worker port', WORKERS, { port: 'ws' }, 'port', 'expected an integer, got string'],
    ['zero processes', CLUSTER, { processes: 0 }, 'processes', 'must be at least 1'],
    ['forward port', CLUSTER, { forward_port: 70000 }, 'forward_port', 'must be at most 65535'],
    ['zero heartbeat', CLUSTER, { heartbeat_ms: 0 }, 'heartbeat_ms', 'must be at least 1'],
    ['lease equal to heartbeat', CLUSTER, { heartbeat_ms: 1000, lease_ms: 1000 }, 'lease_ms', 'must be greater than heartbeat_ms'],
    ['lease below default heartbeat', CLUSTER, { lease_ms: 500 }, 'lease_ms', 'must be greater than heartbeat_ms'],
    ['child node arg', CLUSTER, { child_node_args: ['--inspect', 'index.js'] }, 'child_node_args[1]', 'must be one Node.js or V8 flag, such as --max-semi-space-size=16'],
  ];

  it.each(invalid)('reports an invalid %s with its path', (_name, moduleClass, config, key, message) => {
    expect(issuesOf(withModule(moduleClass, config))).toEqual([{ path: `modules[0](${moduleClass}).config.${key}`, message }]);
  });
});

describe('cluster module', () => {
  it('accepts several processes, a redis_url with a secret, and a cluster name', () => {
    const config = parseConfig(withModule(CLUSTER, { processes: 4, redis_url: 'redis://127.0.0.1:6390/0', secret: 's', name: 'prod-eu' }));
    expect(config.cluster).toMatchObject({ processes: 4, redisUrl: 'redis://127.0.0.1:6390/0', secret: 's', name: 'prod-eu' });
  });

  it('requires a secret when redis_url is set, and treats an empty or null redis_url as unset', () => {
    expect(issuesOf(withModule(CLUSTER, { redis_url: 'redis://localhost:6379' }))).toEqual([
      {
        path: `modules[0](${CLUSTER}).config.secret`,
        message: 'is required when redis_url is set: forward listeners of other hosts must authenticate callers',
      },
    ]);
    expect(parseConfig(withModule(CLUSTER, { redis_url: '' })).cluster).toStrictEqual(DEFAULTS.cluster);
    expect(parseConfig(withModule(CLUSTER, { redis_url: null })).cluster).toStrictEqual(DEFAULTS.cluster);
  });

  it('passes redis_tls_ca_file on as redisTlsCaFile; empty means unset', () => {
    const config = parseConfig(withModule(CLUSTER, { redis_url: 'rediss://r:6380', secret: 's', redis_tls_ca_file: '/etc/redis/ca.pem' }));
    expect(config.cluster).toMatchObject({ redisUrl: 'rediss://r:6380', redisTlsCaFile: '/etc/redis/ca.pem' });
    expect(parseConfig(withModule(CLUSTER, { redis_tls_ca_file: '' })).cluster).toStrictEqual(DEFAULTS.cluster);
    expect(issuesOf(withModule(CLUSTER, { redis_tls_ca_file: 7 }))).toEqual([
      { path: `modules[0](${CLUSTER}).config.redis_tls_ca_file`, message: 'expected a string, got 7' },
    ]);
  });

  it('maps forward_tls to forwardTls with its three files, each required and non-empty', () => {
    const files = { cert_file: '/tls/node.pem', key_file: '/tls/node.key', ca_file: '/tls/ca.pem' };
    expect(parseConfig(withModule(CLUSTER, { forward_tls: files })).cluster.forwardTls).toStrictEqual({
      certFile: '/tls/node.pem',
      keyFile: '/tls/node.key',
      caFile: '/tls/ca.pem',
    });
    expect(parseConfig(withModule(CLUSTER, {})).cluster.forwardTls).toBeUndefined();
    expect(issuesOf(withModule(CLUSTER, { forward_tls: { cert_file: '/tls/node.pem', key_file: '' } }))).toEqual([
      { path: `modules[0](${CLUSTER}).config.forward_tls.key_file`, message: 'must not be empty' },
      { path: `modules[0](${CLUSTER}).config.forward_tls.ca_file`, message: 'is required' },
    ]);
    expect(issuesOf(withModule(CLUSTER, { forward_tls: { ...files, verify: false } }))).toEqual([
      { path: `modules[0](${CLUSTER}).config.forward_tls.verify`, message: 'unknown key; allowed keys are cert_file, key_file, ca_file' },
    ]);
  });

  it('rejects a cluster name that cannot be a key prefix', () => {
    expect(issuesOf(withModule(CLUSTER, { name: 'a b' }))).toEqual([
      { path: `modules[0](${CLUSTER}).config.name`, message: 'must be 1-64 letters, digits, ".", "_" or "-"' },
    ]);
  });

  it('reports the secret check together with the lease check', () => {
    expect(issuesOf(withModule(CLUSTER, { processes: 0, redis_url: 'redis://r', lease_ms: 10 }))).toEqual([
      { path: `modules[0](${CLUSTER}).config.processes`, message: 'must be at least 1' },
      {
        path: `modules[0](${CLUSTER}).config.secret`,
        message: 'is required when redis_url is set: forward listeners of other hosts must authenticate callers',
      },
      { path: `modules[0](${CLUSTER}).config.lease_ms`, message: 'must be greater than heartbeat_ms' },
    ]);
  });
});

describe('several problems at once', () => {
  it('reports every issue, across the top level and modules, in one error', () => {
    const err = configError(() =>
      parseConfig({
        port: 'x',
        modules: [
          { class: API, config: { port: 70000, body_limit: -1, cors: { allowed_origins: ['*'] } } },
          { class: ADMIN, config: { host: '' } },
          { class: CLUSTER, config: { processes: 0 } },
        ],
      }),
    );
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.issues).toEqual([
      { path: 'port', message: 'expected an integer, got string' },
      { path: `${apiPath(0)}.config.port`, message: 'must be at most 65535' },
      { path: `${apiPath(0)}.config.body_limit`, message: 'must be at least 0' },
      { path: `modules[1](${ADMIN}).config.host`, message: 'must not be empty' },
      { path: `modules[2](${CLUSTER}).config.processes`, message: 'must be at least 1' },
    ]);
    expect(err.message).toBe(
      [
        'Invalid configuration (5 issues):',
        '  port: expected an integer, got string',
        `  ${apiPath(0)}.config.port: must be at most 65535`,
        `  ${apiPath(0)}.config.body_limit: must be at least 0`,
        `  modules[1](${ADMIN}).config.host: must not be empty`,
        `  modules[2](${CLUSTER}).config.processes: must be at least 1`,
      ].join('\n'),
    );
  });
});

describe('unknown keys', () => {
  it('names an unknown top-level key', () => {
    expect(issuesOf({ port: 49134, ports: [1] })).toEqual([{ path: 'ports', message: 'unknown key; allowed keys are port, workers, modules' }]);
  });

  it('names an unknown module config key and suggests the snake_case spelling', () => {
    expect(issuesOf(withModule(API, { bodyLimit: 10, verbose: true }))).toEqual([
      { path: `${apiPath()}.config.bodyLimit`, message: 'unknown key; did you mean "body_limit"?' },
      {
        path: `${apiPath()}.config.verbose`,
        message:
          'unknown key; allowed keys are port, host, default_timeout, concurrency_request_limit, concurrency_queue_limit, cors, body_limit, stream_body_limit, trust_proxy, request_id_header, ignore_trailing_slash, not_found_function, middleware',
      },
    ]);
  });

  it('names an unknown key inside cors and inside a middleware entry', () => {
    expect(
      issuesOf(
        withModule(API, {
          cors: { allowed_origins: ['*'], allowed_methods: ['GET'], allowed_headers: ['x-a'] },
          middleware: [{ function_id: 'a', phase: 'onRequest', scope: '/x' }],
        }),
      ),
    ).toEqual([
      { path: `${apiPath()}.config.cors.allowed_headers`, message: 'unknown key; allowed keys are allowed_origins, allowed_methods' },
      { path: `${apiPath()}.config.middleware[0].scope`, message: 'unknown key; allowed keys are function_id, phase, priority' },
    ]);
  });

  it('names an unknown key in a module entry and a missing class or name', () => {
    expect(issuesOf({ modules: [{ class: API, options: {} }, { config: {} }] })).toEqual([
      { path: `${apiPath(0)}.options`, message: 'unknown key; allowed keys are class, name, image, config' },
      { path: 'modules[1]', message: 'needs a class or a name' },
    ]);
  });

  it('reports malformed module entries', () => {
    expect(issuesOf({ modules: [{ class: 5 }, 7, { class: '' }, { class: API, config: 'port=1' }] })).toEqual([
      { path: 'modules[0].class', message: 'expected a string, got 5' },
      { path: 'modules[1]', message: 'expected an object, got 7' },
      { path: 'modules[2].class', message: 'must not be empty' },
      { path: `${apiPath(3)}.config`, message: 'expected an object, got string' },
    ]);
    expect(issuesOf({ modules: { class: API } })).toEqual([{ path: 'modules', message: 'expected a list, got object' }]);
  });

  it('keeps a __proto__ key as a key and reports it', () => {
    expect(configError(() => loadConfigText('{"__proto__": {"port": 1}}', 'json', {})).issues).toEqual([
      { path: '__proto__', message: 'unknown key; allowed keys are port, workers, modules' },
    ]);
  });

  it('names a key that is not a plain identifier', () => {
    expect(issuesOf(withModule(ADMIN, { 'bind-address': 'x' }))).toEqual([
      { path: `modules[0](${ADMIN}).config["bind-address"]`, message: 'unknown key; allowed keys are host, port' },
    ]);
  });
});

describe('the iii 0.22 workers: form', () => {
  // Shapes of iii 0.22.1's configs (sdk/fixtures/config-test.yaml, sdk/packages/node/iii-example/config.yaml),
  // written here with our own values.
  it('reads iii-http, iii-worker-manager, iii-observability and iii-http-functions with iii\'s keys', () => {
    const config = loadConfigText(
      [
        'workers:',
        '  - name: iii-worker-manager',
        '    config: { port: 49199, host: 127.0.0.1, handshake_timeout_ms: 2500 }',
        '  - name: iii-http',
        '    config:',
        '      port: 3199',
        '      host: 127.0.0.1',
        '      default_timeout: 15000',
        '      concurrency_request_limit: 64',
        '      cors: { allowed_origins: ["*"], allowed_methods: [GET, post] }',
        '      middleware: [{ function_id: mw::auth }]',
        '  - name: iii-observability',
        '    config: { enabled: true, service_name: svc, exporter: memory, sampling_ratio: 0.5, worker_metrics: { enabled: true } }',
        '  - name: iii-http-functions',
        '    config: { security: { url_allowlist: [localhost], block_private_ips: false, require_https: false } }',
      ].join('\n'),
      'yaml',
      {},
    );
    expect(config.workers).toMatchObject({ port: 49199, host: '127.0.0.1', handshakeTimeoutMs: 2500 });
    expect(config.api).toMatchObject({
      port: 3199,
      host: '127.0.0.1',
      defaultTimeoutMs: 15000,
      concurrencyRequestLimit: 64,
      cors: { allowedOrigins: ['*'], allowedMethods: ['GET', 'POST'] },
      // iii's default phase for a configured middleware is preHandler.
      middleware: [{ functionId: 'mw::auth', phase: 'preHandler', priority: 0 }],
    });
    expect(config.observability).toMatchObject({ enabled: true, service_name: 'svc', exporter: 'memory', sampling_ratio: 0.5 });
    expect(config.httpFunctions).toStrictEqual({ urlAllowlist: ['localhost'], blockPrivateIps: false, requireHttps: false });
    expect(config.skippedModules).toEqual([]);
  });

  it('accepts iii\'s other modules with their configs, skips unknown ones once each, and accepts the built-in engine functions', () => {
    const config = parseConfig({
      workers: [
        { name: 'iii-stream', config: { port: 3112, adapter: { name: 'redis' } } },
        { name: 'iii-state' },
        { name: 'iii-engine-functions' },
        { name: 'iii-http', config: { port: 4000 } },
        { name: 'iii-cron', config: { adapter: { name: 'kv' } } },
        { name: 'iii-pubsub', config: { adapter: { name: 'local' } } },
        { name: 'iii-unknown' },
        { name: 'iii-unknown' },
        { name: 'my-worker', image: 'ghcr.io/acme/w:1' },
      ],
    });
    expect(config.api.port).toBe(4000);
    expect(config.modules).toEqual({
      'iii-stream': { port: 3112, adapter: { name: 'redis' } },
      'iii-state': {},
      'iii-cron': { adapter: { name: 'kv' } },
      'iii-pubsub': { adapter: { name: 'local' } },
    });
    expect(config.skippedModules).toEqual(['iii-unknown', 'my-worker (image ghcr.io/acme/w:1)']);
  });

  it('refuses a module configured twice and a module config with an unknown key or a bad adapter, naming each', () => {
    expect(() =>
      parseConfig({
        workers: [
          { name: 'iii-state', config: { triggers_enabledd: true } },
          { name: 'iii-cron', config: { adapter: { name: 'postgres' } } },
          { name: 'iii-pubsub' },
          { name: 'iii-pubsub' },
          { name: 'iii-state', config: { adapter: { name: 'kv', config: { store_method: 'weird' } } } },
        ],
      }),
    ).toThrow(/triggers_enabledd[\s\S]*adapter[\s\S]*iii-pubsub is configured twice/);
  });

  it('names Switchyard\'s own modules switchyard-admin and switchyard-cluster', () => {
    const config = parseConfig({
      workers: [
        { name: 'switchyard-admin', config: { port: 0 } },
        { name: 'switchyard-cluster', config: { processes: 3, name: 'blue' } },
      ],
    });
    expect(config.admin.port).toBe(0);
    expect(config.cluster).toMatchObject({ processes: 3, name: 'blue' });
  });

  it('takes `http` as the newer name of iii-http and refuses both at once, as iii does', () => {
    expect(parseConfig({ workers: [{ name: 'http', config: { port: 4001 } }] }).api.port).toBe(4001);
    expect(issuesOf({ workers: [{ name: 'iii-http' }, { name: 'http' }] })).toEqual([
      { path: 'workers[1](http)', message: "'iii-http' is the older name for 'http' and both are present; remove 'iii-http' (as iii 0.22.1 requires)" },
    ]);
  });

  it('reads names in modules: too, and refuses an entry with both a class and a name', () => {
    expect(parseConfig({ modules: [{ name: 'iii-http', config: { port: 4002 } }] }).api.port).toBe(4002);
    expect(issuesOf({ modules: [{ class: API, name: 'iii-http' }] })).toEqual([
      { path: `modules[0](iii-http)`, message: 'has both class and name; set one of them' },
    ]);
  });

  it('refuses the same module in both forms', () => {
    expect(issuesOf({ workers: [{ name: 'iii-http' }], modules: [{ class: API }] })).toEqual([
      { path: apiPath(0), message: `duplicate module; ${API} is already configured at workers[0](iii-http)` },
    ]);
  });

  it("reads iii's RBAC listeners: further iii-worker-manager entries with rbac and middleware_function_id", () => {
    const config = parseConfig({
      workers: [
        { name: 'iii-worker-manager', config: { port: 49199 } },
        {
          name: 'iii-worker-manager',
          config: {
            host: '0.0.0.0',
            port: 49135,
            middleware_function_id: 'p::mw',
            rbac: {
              auth_function_id: 'p::auth',
              on_function_registration_function_id: 'p::on-fn',
              on_trigger_registration_function_id: 'p::on-trigger',
              on_trigger_type_registration_function_id: 'p::on-type',
              expose_functions: ['match("api::*")', "match('*::public')", { metadata: { public: true, tier: 'match("*free*")' } }],
            },
          },
        },
      ],
    });
    expect(config.workers.port).toBe(49199);
    expect(config.workers.rbac).toBeUndefined();
    expect(config.workers.extraListeners).toHaveLength(1);
    const listener = config.workers.extraListeners[0];
    expect(listener?.port).toBe(49135);
    expect(listener?.middlewareFunctionId).toBe('p::mw');
    expect(listener?.rbac).toStrictEqual({
      authFunctionId: 'p::auth',
      onFunctionRegistrationFunctionId: 'p::on-fn',
      onTriggerRegistrationFunctionId: 'p::on-trigger',
      onTriggerTypeRegistrationFunctionId: 'p::on-type',
      exposeFunctions: [{ match: 'api::*' }, { match: '*::public' }, { metadata: { public: { equals: true }, tier: { match: '*free*' } } }],
    });
  });

  it('max_partial_frame_bytes, max_listener_queued_bytes and max_listener_call_bytes: per listener, by default twice max_frame_bytes, max_queued_bytes and four times max_frame_bytes; lower, refused', () => {
    const listeners = (main: Record<string, unknown>, extra: Record<string, unknown>) => ({
      workers: [
        { name: 'iii-worker-manager', config: { port: 49199, ...main } },
        { name: 'iii-worker-manager', config: { port: 49300, ...extra } },
      ],
    });
    const defaults = parseConfig(listeners({}, { max_frame_bytes: 1048576, max_queued_bytes: 4194304 })).workers;
    expect([defaults.maxPartialFrameBytes, defaults.maxListenerQueuedBytes, defaults.maxListenerCallBytes]).toEqual([32 * 1024 * 1024, 64 * 1024 * 1024, 64 * 1024 * 1024]);
    const extra = defaults.extraListeners[0];
    expect([extra?.maxPartialFrameBytes, extra?.maxListenerQueuedBytes, extra?.maxListenerCallBytes]).toEqual([2 * 1024 * 1024, 4 * 1024 * 1024, 4 * 1024 * 1024]);
    const set = parseConfig(listeners({}, { max_frame_bytes: 1048576, max_partial_frame_bytes: 2097152, max_queued_bytes: 65536, max_listener_queued_bytes: 65536 })).workers.extraListeners[0];
    expect([set?.maxPartialFrameBytes, set?.maxListenerQueuedBytes]).toEqual([2097152, 65536]);
    expect(issuesOf(listeners({ max_partial_frame_bytes: 16777216 }, { max_frame_bytes: 1048576, max_partial_frame_bytes: 2097151, max_listener_queued_bytes: 65536, max_listener_call_bytes: 1048575 }))).toEqual([
      expect.objectContaining({ path: 'workers[0](iii-worker-manager).config.max_partial_frame_bytes', message: expect.stringContaining('twice max_frame_bytes') }),
      expect.objectContaining({ path: 'workers[1](iii-worker-manager).config.max_partial_frame_bytes', message: expect.stringContaining('twice max_frame_bytes') }),
      expect.objectContaining({ path: 'workers[1](iii-worker-manager).config.max_listener_queued_bytes', message: expect.stringContaining('at least max_queued_bytes') }),
      expect.objectContaining({ path: 'workers[1](iii-worker-manager).config.max_listener_call_bytes', message: expect.stringContaining('at least max_frame_bytes') }),
    ]);
  });

  it('a listener with rbac has lower default budgets (max_queued_bytes, max_channels, max_connections, max_listener_call_bytes, max_listener_registration_bytes); set keys win; a listener_queued below the rbac default per worker is refused', () => {
    const MiB = 1024 * 1024;
    const config = parseConfig({
      workers: [
        { name: 'iii-worker-manager', config: { port: 49199 } },
        { name: 'iii-worker-manager', config: { port: 49300, rbac: { expose_functions: [] } } },
        { name: 'iii-worker-manager', config: { port: 49301, rbac: { expose_functions: [] }, max_queued_bytes: 65536, max_channels: 300, max_connections: 2000, max_listener_call_bytes: 64 * MiB, max_listener_registration_bytes: 4 * MiB } },
      ],
    }).workers;
    const open = config;
    const [restricted, set] = config.extraListeners;
    expect([open.limits.maxQueuedBytes, open.maxListenerQueuedBytes, open.limits.maxChannels, open.maxConnections, open.maxListenerCallBytes, open.maxListenerRegistrationBytes]).toEqual([64 * MiB, 64 * MiB, 256, 1024, 64 * MiB, undefined]);
    expect([restricted?.limits.maxQueuedBytes, restricted?.maxListenerQueuedBytes, restricted?.limits.maxChannels, restricted?.maxConnections, restricted?.maxListenerCallBytes, restricted?.maxListenerRegistrationBytes]).toEqual([16 * MiB, 16 * MiB, 32, 256, 16 * MiB, MiB]);
    expect([set?.limits.maxQueuedBytes, set?.maxListenerQueuedBytes, set?.limits.maxChannels, set?.maxConnections, set?.maxListenerCallBytes, set?.maxListenerRegistrationBytes]).toEqual([65536, 65536, 300, 2000, 64 * MiB, 4 * MiB]);
    expect(
      issuesOf({ workers: [{ name: 'iii-worker-manager', config: { port: 49199 } }, { name: 'iii-worker-manager', config: { port: 49300, rbac: { expose_functions: [] }, max_listener_queued_bytes: 8 * MiB } }] }),
    ).toEqual([expect.objectContaining({ path: 'workers[1](iii-worker-manager).config.max_listener_queued_bytes', message: expect.stringContaining('at least max_queued_bytes') })]);
  });

  it('refuses a bad function filter, and a further listener without a port of its own', () => {
    expect(
      issuesOf({
        workers: [
          { name: 'iii-worker-manager', config: { port: 49199 } },
          { name: 'iii-worker-manager', config: { port: 49199 } },
          { name: 'iii-worker-manager', config: {} },
          { name: 'iii-worker-manager', config: { port: 49300, rbac: { expose_functions: ['api::*', { metadata: {} }] } } },
        ],
      }).map((issue) => issue.path),
    ).toEqual([
      'workers[3](iii-worker-manager).config.rbac.expose_functions[0]',
      'workers[3](iii-worker-manager).config.rbac.expose_functions[1]',
      'workers[1](iii-worker-manager).config.port',
      'workers[2](iii-worker-manager).config.port',
    ]);
  });

  it('validates iii-observability and iii-http-functions against iii\'s keys', () => {
    expect(
      issuesOf({
        workers: [
          { name: 'iii-observability', config: { sampling_ratio: 2, exporter: 'zipkin' } },
          { name: 'iii-http-functions', config: { security: { allow: [] } } },
        ],
      }),
    ).toEqual([
      { path: 'workers[0](iii-observability).config.exporter', message: 'must be one of "otlp", "memory", "both", "none"' },
      { path: 'workers[0](iii-observability).config.sampling_ratio', message: 'must be at most 1' },
      { path: 'workers[1](iii-http-functions).config.security.allow', message: 'unknown key; allowed keys are url_allowlist, block_private_ips, require_https' },
    ]);
    // iii: an empty allowlist means any host.
    expect(parseConfig({ workers: [{ name: 'iii-http-functions' }] }).httpFunctions.urlAllowlist).toEqual(['*']);
  });
});

describe('module list (classes)', () => {
  it('skips unknown module classes and lists each once', () => {
    const config = parseConfig({
      modules: [
        { class: 'modules::stream::StreamModule', config: { port: 3112, host: '0.0.0.0', anything: { goes: true } } },
        { class: API, config: { port: 4000 } },
        { class: 'modules::queue::QueueModule' },
        { class: 'modules::stream::StreamModule', config: null },
      ],
    });
    expect(config.api.port).toBe(4000);
    expect(config.skippedModules).toEqual(['modules::stream::StreamModule', 'modules::queue::QueueModule']);
  });

  it('rejects a known module class configured twice', () => {
    expect(issuesOf({ modules: [{ class: API }, { class: ADMIN }, { class: API, config: { port: 1 } }] })).toEqual([
      { path: apiPath(2), message: `duplicate module; ${API} is already configured at ${apiPath(0)}` },
    ]);
  });
});

describe('worker port', () => {
  it('uses the top-level port when the WorkerModule has none', () => {
    expect(parseConfig({ port: 50000 }).workers.port).toBe(50000);
    expect(parseConfig({ port: 50000, modules: [{ class: WORKERS, config: { host: '::' } }] }).workers).toStrictEqual({
      ...DEFAULTS.workers,
      host: '::',
      port: 50000,
    });
  });

  it('uses the WorkerModule port when the top level has none', () => {
    expect(parseConfig(withModule(WORKERS, { port: 50001 })).workers.port).toBe(50001);
  });

  it('accepts the same port in both places', () => {
    expect(parseConfig({ port: 50002, modules: [{ class: WORKERS, config: { port: 50002 } }] }).workers.port).toBe(50002);
  });

  it('rejects two different ports, naming both', () => {
    expect(issuesOf({ port: 49134, modules: [{ class: API }, { class: WORKERS, config: { port: 50000 } }] })).toEqual([
      {
        path: `modules[1](${WORKERS}).config.port`,
        message: 'is 50000 but the top-level port is 49134; set the worker port in only one place, or the same value in both',
      },
    ]);
  });
});

describe('substituteEnv', () => {
  it('replaces set variables and defaults', () => {
    expect(substituteEnv('a: ${A}\nb: ${B:fallback}\nc: ${C:}\nd: ${D:x}', { A: 'one', D: '' })).toBe(
      'a: one\nb: fallback\nc: \nd: ',
    );
  });

  it('keeps colons in defaults and leaves other dollar signs alone', () => {
    expect(substituteEnv('url: ${URL:redis://localhost:6379}\nprice: $5 and ${not closed', {})).toBe(
      'url: redis://localhost:6379\nprice: $5 and ${not closed',
    );
  });

  it('reports every missing variable at once, with the lines that use it', () => {
    const err = configError(() => substituteEnv('a: ${ALPHA}\nb: ${BETA}\nc: ${ALPHA}\nd: ${GAMMA:ok}', {}));
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.issues).toEqual([
      {
        path: '${ALPHA}',
        message: 'environment variable ALPHA is not set and the reference has no default (lines 1, 3); set it or write ${ALPHA:default}',
      },
      {
        path: '${BETA}',
        message: 'environment variable BETA is not set and the reference has no default (line 2); set it or write ${BETA:default}',
      },
    ]);
  });

  it('substitutes before parsing, so numbers stay numbers', () => {
    const yaml = [
      'port: ${WORKER_PORT:49134}',
      'modules:',
      '  - class: modules::api::RestApiModule',
      '    config:',
      '      port: ${PORT:3111}',
      '      trust_proxy: ${TRUST:false}',
      '      not_found_function: "${NOT_FOUND}"',
      '  - class: modules::cluster::ClusterModule',
      '    config:',
      '      redis_url: ${REDIS_URL:}',
      '      node_id: "${NODE_ID:}"',
    ].join('\n');
    const config = loadConfigText(yaml, 'yaml', { PORT: '8080', TRUST: 'true', NOT_FOUND: 'fallback' });
    expect(config.api.port).toBe(8080);
    expect(config.api.trustProxy).toBe(true);
    expect(config.api.notFoundFunction).toBe('fallback');
    expect(config.workers.port).toBe(49134);
    expect(config.cluster).toStrictEqual(DEFAULTS.cluster);

    const clustered = loadConfigText(`${yaml}\n      secret: s`, 'yaml', { NOT_FOUND: 'f', REDIS_URL: 'redis://r:6379' });
    expect(clustered.cluster.redisUrl).toBe('redis://r:6379');
  });

  it('fails loading when a variable without default is unset', () => {
    const err = configError(() => loadConfigText('port: ${WORKER_PORT}\nmodules: ${MODULES}\n', 'yaml', {}));
    expect(err.issues.map((issue) => issue.path)).toEqual(['${WORKER_PORT}', '${MODULES}']);
  });
});

describe('formats', () => {
  const yaml = `
port: 49200
modules:
  - class: modules::api::RestApiModule
    config:
      port: 3200
      cors:
        allowed_origins: ["https://a.example"]
        allowed_methods: [get]
      middleware:
        - function_id: auth
          phase: preHandler
          priority: 1
  - class: modules::admin::AdminModule
    config: { port: 0 }
`;
  const json = JSON.stringify({
    port: 49200,
    modules: [
      {
        class: API,
        config: {
          port: 3200,
          cors: { allowed_origins: ['https://a.example'], allowed_methods: ['get'] },
          middleware: [{ function_id: 'auth', phase: 'preHandler', priority: 1 }],
        },
      },
      { class: ADMIN, config: { port: 0 } },
    ],
  });

  it('reads the same config from YAML and JSON', () => {
    const fromYaml = loadConfigText(yaml, 'yaml', {});
    expect(fromYaml).toStrictEqual(loadConfigText(json, 'json', {}));
    expect(fromYaml.api.port).toBe(3200);
    expect(fromYaml.api.cors).toStrictEqual({ allowedOrigins: ['https://a.example'], allowedMethods: ['GET'] });
    expect(fromYaml.api.middleware).toStrictEqual([{ functionId: 'auth', phase: 'preHandler', priority: 1 }]);
    expect(fromYaml.admin.port).toBe(0);
    expect(fromYaml.workers.port).toBe(49200);
  });

  it('strips a byte order mark', () => {
    expect(loadConfigText(`\uFEFF${json}`, 'json', {}).api.port).toBe(3200);
  });

  it('reports YAML syntax errors with their line', () => {
    expect(configError(() => loadConfigText('port: 1\nport: 2\n', 'yaml', {})).issues).toEqual([
      { path: 'line 2, column 1', message: 'YAML syntax error: Map keys must be unique' },
    ]);
    const err = configError(() => loadConfigText('modules:\n  - class: [a\nport: 1\n', 'yaml', {}));
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.issues[0]?.path).toMatch(/^line \d+, column \d+$/);
  });

  it('reports JSON syntax errors with their line when the parser gives a position', () => {
    const err = configError(() => loadConfigText('{\n  "port": 1,\n}', 'json', {}));
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.issues).toHaveLength(1);
    expect(err.issues[0]?.path).toBe('line 3, column 1');
    expect(err.issues[0]?.message).toMatch(/^JSON syntax error: /);
    expect(err.message).not.toContain('"port"');
  });

  it('reports an unresolved YAML alias', () => {
    expect(configError(() => loadConfigText('port: *nowhere\n', 'yaml', {})).issues[0]?.path).toMatch(/^line 1|^\(yaml\)$/);
  });
});

describe('frozen result', () => {
  it('cannot be mutated, at any depth', () => {
    const config = parseConfig(
      withModule(API, {
        cors: { allowed_origins: ['*'], allowed_methods: ['GET'] },
        middleware: [{ function_id: 'a', phase: 'onRequest' }],
      }),
    );
    expect(() => {
      (config.api as { port: number }).port = 1;
    }).toThrow(TypeError);
    expect(() => {
      (config as { admin: unknown }).admin = {};
    }).toThrow(TypeError);
    expect(() => (config.api.cors?.allowedOrigins as string[]).push('https://evil.example')).toThrow(TypeError);
    expect(() => {
      (config.api.middleware[0] as { priority: number }).priority = 9;
    }).toThrow(TypeError);
    expect(() => (config.skippedModules as string[]).push('x')).toThrow(TypeError);
    expect(config.api.port).toBe(3111);
    expect(Object.isFrozen(defaultConfig().cluster)).toBe(true);
  });

  it('does not share state between results', () => {
    expect(defaultConfig()).not.toBe(defaultConfig());
    expect(defaultConfig().api.middleware).not.toBe(defaultConfig().api.middleware);
  });
});

describe('loadConfigFile', () => {
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'switchyard-config-'));
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('uses the built-in defaults when no path is given and there is no config.yaml', async () => {
    await expect(loadConfigFile(undefined, {}, dir)).resolves.toStrictEqual({ config: DEFAULTS, source: 'defaults' });
  });

  it('uses ./config.yaml from the working directory when no path is given', async () => {
    await writeFile(join(dir, 'config.yaml'), `modules:\n  - class: ${API}\n    config: { port: \${PORT} }\n`);
    const { config, source } = await loadConfigFile(undefined, { PORT: '3999' }, dir);
    expect(source).toBe(join(dir, 'config.yaml'));
    expect(config.api.port).toBe(3999);
  });

  it('falls back to ./config.yml', async () => {
    await writeFile(join(dir, 'config.yml'), 'port: 40001\n');
    const { config, source } = await loadConfigFile(undefined, {}, dir);
    expect(source).toBe(join(dir, 'config.yml'));
    expect(config.workers.port).toBe(40001);
  });

  it('loads an explicit path relative to cwd, JSON by extension', async () => {
    await mkdir(join(dir, 'conf'));
    await writeFile(join(dir, 'conf', 'engine.json'), JSON.stringify({ modules: [{ class: ADMIN, config: { port: 9999 } }] }));
    const { config, source } = await loadConfigFile('conf/engine.json', {}, dir);
    expect(source).toBe(join(dir, 'conf', 'engine.json'));
    expect(config.admin.port).toBe(9999);
  });

  it('loads an absolute path as YAML when the extension is not .json', async () => {
    const file = join(dir, 'engine.conf');
    await writeFile(file, 'port: 40002\n');
    expect((await loadConfigFile(file, {}, '/')).config.workers.port).toBe(40002);
  });

  it('reports a missing explicit file as CONFIG_UNREADABLE', async () => {
    const missing = join(dir, 'nope.yaml');
    const err = await loadConfigFile('nope.yaml', {}, dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe('CONFIG_UNREADABLE');
    expect((err as ConfigError).issues).toEqual([{ path: missing, message: 'file does not exist' }]);
    expect((err as ConfigError).message).toBe(`Configuration file could not be read:\n  ${missing}: file does not exist`);
  });

  it('reports a directory given as the config file as CONFIG_UNREADABLE', async () => {
    const err = await loadConfigFile('.', {}, dir).catch((e: unknown) => e);
    expect((err as ConfigError).code).toBe('CONFIG_UNREADABLE');
    expect((err as ConfigError).issues).toEqual([{ path: dir, message: 'is a directory, not a file' }]);
  });

  it('names the file in the message of an invalid config', async () => {
    const file = join(dir, 'config.yaml');
    await writeFile(file, 'port: 70000\nextra: 1\n');
    const err = await loadConfigFile(undefined, {}, dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe('CONFIG_INVALID');
    expect((err as ConfigError).source).toBe(file);
    expect((err as ConfigError).message).toBe(
      `Invalid configuration in ${file} (2 issues):\n  port: must be at most 65535\n  extra: unknown key; allowed keys are port, workers, modules`,
    );
  });
});

describe('substituteEnv and YAML comments', () => {
  it('leaves references in comments alone, so a commented-out line needs no variable', () => {
    const yaml = ['# auth_token: ${WORKER_TOKEN}', 'port: ${PORT:1} # was ${OLD_PORT}', 'name: "a # not a comment ${NAME:x}"'].join('\n');
    expect(substituteEnv(yaml, {})).toBe(['# auth_token: ${WORKER_TOKEN}', 'port: 1 # was ${OLD_PORT}', 'name: "a # not a comment x"'].join('\n'));
  });

  it('still reports a missing variable outside comments', () => {
    expect(() => substituteEnv('a: ${MISSING} # ok ${ALSO_MISSING}', {})).toThrow(/MISSING is not set/);
    expect(() => substituteEnv('a: ${MISSING} # ok ${ALSO_MISSING}', {})).not.toThrow(/ALSO_MISSING/);
  });

  it('substitutes everywhere in JSON, which has no comments', () => {
    expect(substituteEnv('{"a": "# ${X:1}"}', {}, 'json')).toBe('{"a": "# 1"}');
  });
});
