// iii 0.22.1 projects on Switchyard, with the real iii-sdk 0.22.1 in this process (as iii's own SDK
// tests run it). Each describe names the iii source it mirrors (iii-hq/iii at tag iii/v0.22.1); the
// cases are written here, against a two-node Redis cluster where iii has one engine, so that every
// engine function and every trigger crosses nodes. docs/compatibility.md is the table these keep true.
import { createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForStatus } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';
import type { RedisServer } from '../support/redis.js';
import { freePort, startRedisServer } from '../support/redis.js';

// The SDK reads its OpenTelemetry switch at import: off, so no exporter dials the engine's /otel.
process.env.OTEL_ENABLED = 'false';
const { registerWorker, TriggerAction } = await import('iii-sdk');
type Client = ReturnType<typeof registerWorker>;

const RECONNECT = { maxRetries: 3, initialDelayMs: 100, maxDelayMs: 1000 };
const HMAC_ENV = 'COMPAT_WEBHOOK_SECRET';
const HMAC_SECRET = 'compat-hmac-secret';

interface Captured {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  raw: string;
}

/** A webhook receiver on loopback: records each request, answers what the path asks for. */
async function startProbe(): Promise<{ url: (path: string) => string; seen: Captured[]; close: () => Promise<void> }> {
  const seen: Captured[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, raw });
      if (req.url === '/api') {
        // An HTTP-invoked function serving a route answers an ApiResponse.
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ status_code: 201, body: { got: JSON.parse(raw) as unknown } }));
        return;
      }
      if (req.url === '/fail') {
        res.writeHead(422, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { code: 'rejected', message: 'the webhook said no' } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ echoed: raw === '' ? null : (JSON.parse(raw) as unknown), path: req.url }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    seen,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('an iii 0.22 config.yaml (workers: form) starts Switchyard: sdk/fixtures/config-test.yaml, iii-example/config.yaml', () => {
  let engine: EngineHandle;
  beforeAll(async () => {
    // iii's file names the stream port through ${STREAMS_PORT:3112}: a free one here, so parallel files never collide.
    const streamsPort = await freePort();
    engine = await startEngine({
      logLevel: 'info',
      env: { STREAMS_PORT: String(streamsPort) },
      yaml: (adminPort) =>
        [
          'workers:',
          '  - name: iii-worker-manager',
          '    config: { host: 127.0.0.1, port: 0 }',
          '  - name: iii-stream',
          '    config: { port: ${STREAMS_PORT:3112}, host: 127.0.0.1, adapter: { name: kv, config: { store_method: in_memory } } }',
          '  - name: iii-state',
          '    config: { adapter: { name: kv } }',
          '  - name: iii-http',
          '    config: { host: 127.0.0.1, port: 0, default_timeout: 30000, cors: { allowed_origins: ["*"], allowed_methods: [GET, POST] } }',
          '  - name: iii-observability',
          '    config: { enabled: ${OTEL_ENABLED:true}, service_name: compat, exporter: memory, sampling_ratio: 1.0, logs_console_output: false }',
          '  - name: iii-http-functions',
          '    config: { security: { url_allowlist: [localhost, 127.0.0.1], block_private_ips: false, require_https: false } }',
          '  - name: iii-pubsub',
          '    config: { adapter: { name: local } }',
          '  - name: iii-cron',
          '    config: { adapter: { name: kv } }',
          '  - name: switchyard-admin',
          `    config: { host: 127.0.0.1, port: ${adminPort} }`,
          '  - name: switchyard-cluster',
          '    config: { processes: 1 }',
        ].join('\n'),
    });
  });
  afterAll(async () => {
    await engine?.stop();
  });

  it('serves routes and starts every iii module the file names (none is skipped)', async () => {
    const worker = registerWorker(engine.workerUrl, { reconnectionConfig: RECONNECT });
    try {
      worker.registerFunction('compat::hello', () => Promise.resolve({ status_code: 200, body: { hello: 'iii' } }));
      worker.registerTrigger({ type: 'http', function_id: 'compat::hello', config: { api_path: 'compat/hello', http_method: 'GET' } });
      const res = await waitForStatus(`${engine.httpUrl}/compat/hello`, (s) => s === 200);
      expect(res.json()).toEqual({ hello: 'iii' });
    } finally {
      await worker.shutdown();
    }
    const skipped = engine.stdout.json().filter((line) => typeof line.skippedModule === 'string').map((line) => line.skippedModule);
    expect(skipped).toEqual([]);
  });
});

describe('iii-sdk against a two-node cluster', () => {
  let redis: RedisServer;
  let nodeA: EngineHandle;
  let nodeB: EngineHandle;
  let probe: Awaited<ReturnType<typeof startProbe>>;
  const clients: Client[] = [];
  const connect = (node: EngineHandle, name?: string): Client => {
    const client = registerWorker(node.workerUrl, { reconnectionConfig: RECONNECT, ...(name === undefined ? {} : { workerName: name }) });
    clients.push(client);
    return client;
  };
  const call = <T>(client: Client, functionId: string, payload: unknown = {}): Promise<T> => client.trigger<unknown, T>({ function_id: functionId, payload });

  beforeAll(async () => {
    redis = await startRedisServer();
    probe = await startProbe();
    const cluster = {
      processes: 1,
      redis_url: redis.url,
      secret: 'compat-secret',
      name: `c${Math.random().toString(36).slice(2, 8)}`,
      advertise_host: '127.0.0.1',
      heartbeat_ms: 200,
      lease_ms: 1000,
    };
    const modules = [
      { name: 'iii-http-functions', config: { security: { url_allowlist: ['127.0.0.1'], block_private_ips: false, require_https: false } } },
    ];
    const env = { [HMAC_ENV]: HMAC_SECRET };
    nodeA = await startEngine({ cluster: { ...cluster, node_id: 'node-a' }, modules, env, logLevel: 'info' });
    nodeB = await startEngine({ cluster: { ...cluster, node_id: 'node-b' }, modules, env, logLevel: 'info' });
  });
  afterAll(async () => {
    for (const client of clients) await client.shutdown().catch(() => undefined);
    await nodeA?.stop();
    await nodeB?.stop();
    await probe?.close();
    await redis?.stop();
  });

  describe('engine functions, cluster-wide (sdk/packages/node/iii/tests/service-triggers.test.ts)', () => {
    it('lists functions, trigger types, registered triggers and workers of a worker on the other node', async () => {
      const owner = connect(nodeA, 'compat-owner');
      owner.registerFunction('compat::listed', () => Promise.resolve({ ok: true }), { description: 'a listed function', metadata: { team: 'blue' } });
      owner.registerTrigger({ type: 'http', function_id: 'compat::listed', config: { api_path: 'compat/listed', http_method: 'GET' } });
      const reader = connect(nodeB, 'compat-reader');
      type Rows = { functions: { function_id: string; worker_name: string; description?: string; metadata?: unknown }[] };
      // The SDK names its worker in a message of its own (engine::workers::register), and node B hears each
      // change as it is published: wait for the name too, not only the function.
      await waitUntil(
        async () =>
          (await call<Rows>(reader, 'engine::functions::list')).functions.some((f) => f.function_id === 'compat::listed' && f.worker_name === 'compat-owner'),
        10_000,
        'the function on node A to be listed on node B under its worker name',
      );
      const { functions } = await call<Rows>(reader, 'engine::functions::list', { include_internal: false });
      expect(functions.find((f) => f.function_id === 'compat::listed')).toEqual({
        function_id: 'compat::listed',
        worker_name: 'compat-owner',
        description: 'a listed function',
        metadata: { team: 'blue' },
      });
      expect(functions.some((f) => f.function_id.startsWith('engine::'))).toBe(false);
      const internal = await call<Rows>(reader, 'engine::functions::list', { include_internal: true });
      expect(internal.functions.some((f) => f.function_id === 'engine::functions::list')).toBe(true);

      const { registered_triggers: rows } = await call<{ registered_triggers: Record<string, unknown>[] }>(reader, 'engine::registered-triggers::list', {
        include_internal: false,
      });
      const row = rows.find((t) => t.function_id === 'compat::listed');
      expect(row).toMatchObject({ trigger_type: 'http', worker_name: 'compat-owner', config: { api_path: 'compat/listed', http_method: 'GET' } }); // as registered, as iii lists it
      expect(typeof row?.config_summary).toBe('string');

      const { triggers } = await call<{ triggers: Record<string, unknown>[] }>(reader, 'engine::triggers::list', { include_internal: false });
      expect(triggers.find((t) => t.id === 'http')).toMatchObject({ id: 'http', description: expect.any(String) as unknown });
      expect(triggers.find((t) => t.id === 'http')).not.toHaveProperty('configuration_schema');

      const info = await call<Record<string, unknown>>(reader, 'engine::functions::info', { function_id: 'compat::listed' });
      expect(info).toMatchObject({ function_id: 'compat::listed', worker_name: 'compat-owner', registered_triggers: [{ trigger_type: 'http' }] });
      await expect(call(reader, 'engine::functions::info', { function_id: 'compat::missing' })).rejects.toMatchObject({ code: 'NOT_FOUND' });

      const { workers } = await call<{ workers: Record<string, unknown>[] }>(reader, 'engine::workers::list');
      expect(workers.map((w) => w.name)).toEqual(expect.arrayContaining(['compat-owner', 'compat-reader']));
      const detail = await call<{ functions: { function_id: string }[] }>(reader, 'engine::workers::info', { name: 'compat-owner' });
      expect(detail.functions.map((f) => f.function_id)).toContain('compat::listed');
    });
  });

  describe('worker-provided trigger types (trigger-type-lifecycle.test.ts, trigger-fault-tolerance.test.ts)', () => {
    const makeProvider = (node: EngineHandle, type: string, fireFn: string) => {
      const bindings = new Map<string, { id: string; function_id: string; config: unknown }>();
      const registered: { id: string; function_id: string; config: unknown }[] = [];
      const unregistered: { id: string; function_id: string; config: unknown }[] = [];
      const sdk = connect(node);
      sdk.registerTriggerType(
        { id: type, description: 'compat trigger type' },
        {
          registerTrigger: (cfg: { id: string; function_id: string; config: unknown }) => {
            registered.push(cfg);
            bindings.set(cfg.id, cfg);
            return Promise.resolve();
          },
          unregisterTrigger: (cfg: { id: string; function_id: string; config: unknown }) => {
            unregistered.push(cfg);
            bindings.delete(cfg.id);
            return Promise.resolve();
          },
        },
      );
      sdk.registerFunction(fireFn, async (payload: unknown) => {
        for (const binding of bindings.values()) await sdk.trigger({ function_id: binding.function_id, payload, action: TriggerAction.Void() });
        return { fired: bindings.size };
      });
      return { sdk, registered, unregistered };
    };
    const makeConsumer = (node: EngineHandle, type: string, fn: string) => {
      const calls: unknown[] = [];
      const sdk = connect(node);
      sdk.registerFunction(fn, (payload: unknown) => {
        calls.push(payload);
        return Promise.resolve({ ok: true });
      });
      sdk.registerTrigger({ type, function_id: fn, config: { tag: 'compat' } });
      return { sdk, calls };
    };

    it('delivers a trigger to the provider on the other node, fires it, and withdraws it when the consumer leaves', async () => {
      const provider = makeProvider(nodeA, 'compat.lifecycle', 'compat::lifecycle::fire');
      await waitUntil(async () => (await call<{ triggers: { id: string }[] }>(provider.sdk, 'engine::triggers::list')).triggers.some((t) => t.id === 'compat.lifecycle'), 10_000, 'the type to register');
      const consumer = makeConsumer(nodeB, 'compat.lifecycle', 'compat::lifecycle::consumer');
      await waitUntil(() => provider.registered.length === 1, 10_000, 'the trigger to reach the provider');
      expect(provider.registered[0]).toMatchObject({ function_id: 'compat::lifecycle::consumer', config: { tag: 'compat' } });

      await expect(call(provider.sdk, 'compat::lifecycle::fire', { n: 1 })).resolves.toEqual({ fired: 1 });
      await waitUntil(() => consumer.calls.length === 1, 10_000, 'the consumer to be fired');
      expect(consumer.calls[0]).toMatchObject({ n: 1 });

      await consumer.sdk.shutdown();
      await waitUntil(() => provider.unregistered.length === 1, 10_000, 'the trigger to be withdrawn');
      expect(provider.unregistered[0]).toMatchObject({ id: provider.registered[0]?.id, function_id: 'compat::lifecycle::consumer', config: { tag: 'compat' } });
    });

    it('parks a trigger registered before its type has a provider, and delivers it again to a provider that restarts', async () => {
      const consumer = makeConsumer(nodeA, 'compat.parked', 'compat::parked::consumer');
      const consoleErrors: string[] = [];
      const original = console.error;
      console.error = (...args: unknown[]) => consoleErrors.push(args.join(' '));
      try {
        let provider = makeProvider(nodeB, 'compat.parked', 'compat::parked::fire');
        await waitUntil(() => provider.registered.length === 1, 10_000, 'the parked trigger to reach the late provider');
        const boundId = provider.registered[0]?.id;
        await provider.sdk.shutdown();
        provider = makeProvider(nodeB, 'compat.parked', 'compat::parked::fire2');
        await waitUntil(() => provider.registered.length === 1, 10_000, 'the trigger to reach the restarted provider');
        expect(provider.registered[0]).toMatchObject({ id: boundId, function_id: 'compat::parked::consumer' });
        await call(provider.sdk, 'compat::parked::fire2', { n: 2 });
        await waitUntil(() => consumer.calls.length === 1, 10_000, 'the consumer to be fired');
      } finally {
        console.error = original;
      }
      // A parked registration is not an error to the consumer (the SDK would log "Trigger registration failed").
      expect(consoleErrors.filter((line) => line.includes('Trigger registration failed'))).toEqual([]);
    });
  });

  describe('HTTP-invoked functions (http-external-functions.test.ts; iii-http-functions security)', () => {
    it('calls the URL from a worker on the other node and from an HTTP route, with iii headers and HMAC', async () => {
      const owner = connect(nodeA);
      owner.registerFunction('compat::webhook', {
        url: probe.url('/webhook'),
        method: 'POST',
        timeout_ms: 5000,
        headers: { 'x-custom-header': 'test-value' },
        auth: { type: 'hmac', secret_key: HMAC_ENV },
      });
      owner.registerFunction('compat::webhook-api', { url: probe.url('/api'), method: 'POST' });
      owner.registerTrigger({ type: 'http', function_id: 'compat::webhook-api', config: { api_path: 'compat/webhook', http_method: 'POST' } });
      const caller = connect(nodeB);
      await waitUntil(
        async () => (await call<{ functions: { function_id: string }[] }>(caller, 'engine::functions::list')).functions.some((f) => f.function_id === 'compat::webhook'),
        10_000,
        'the HTTP function to be known on node B',
      );
      const result = await call<{ echoed: unknown }>(caller, 'compat::webhook', { order: 7 });
      // As iii: a worker's object payload names its caller, also towards an HTTP-invoked function.
      expect(result.echoed).toEqual({ order: 7, _caller_worker_id: expect.any(String) as unknown });
      const seen = probe.seen.at(-1) as Captured;
      expect(seen).toMatchObject({ method: 'POST', url: '/webhook' });
      expect(seen.headers).toMatchObject({ 'content-type': 'application/json', 'x-custom-header': 'test-value', 'x-iii-function-path': 'compat::webhook' });
      const timestamp = String(seen.headers['x-iii-timestamp']);
      const expected = createHmac('sha256', HMAC_SECRET).update(`${timestamp}:${Buffer.from(seen.raw).toString('base64')}`).digest('hex');
      expect(seen.headers['x-iii-signature']).toBe(`sha256=${expected}`);
      expect(typeof seen.headers['x-iii-invocation-id']).toBe('string');

      // An HTTP route on node B whose handler is an HTTP-invoked function owned on node A: the URL
      // gets the ApiRequest, its JSON answer is the ApiResponse.
      const res = await waitForStatus(`${nodeB.httpUrl}/compat/webhook`, (s) => s !== 404, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"a":1}',
      });
      expect(res.status).toBe(201);
      expect(res.json()).toMatchObject({ got: { body: { a: 1 }, method: 'POST', path: '/compat/webhook' } });
    });

    it('answers the webhook\'s error as the function\'s error, once (never retried)', async () => {
      const owner = connect(nodeA);
      owner.registerFunction('compat::failing', { url: probe.url('/fail'), method: 'POST' });
      const caller = connect(nodeB);
      await waitUntil(
        async () => (await call<{ functions: { function_id: string }[] }>(caller, 'engine::functions::list')).functions.some((f) => f.function_id === 'compat::failing'),
        10_000,
        'the failing function to be known',
      );
      const before = probe.seen.filter((s) => s.url === '/fail').length;

      await expect(call(caller, 'compat::failing', {})).rejects.toMatchObject({ code: 'rejected', message: 'rejected: the webhook said no' });
      expect(probe.seen.filter((s) => s.url === '/fail').length).toBe(before + 1);
    });

    it('refuses a registration outside the allowlist (iii-http-functions security)', async () => {
      const owner = connect(nodeA);
      owner.registerFunction('compat::outside', { url: 'http://localhost:9/elsewhere', method: 'POST' });
      owner.registerFunction('compat::inside', () => Promise.resolve({ ok: true }));
      await waitUntil(
        async () => (await call<{ functions: { function_id: string }[] }>(owner, 'engine::functions::list')).functions.some((f) => f.function_id === 'compat::inside'),
        10_000,
        'the next registration to be in',
      );
      const { functions } = await call<{ functions: { function_id: string }[] }>(owner, 'engine::functions::list');
      expect(functions.some((f) => f.function_id === 'compat::outside')).toBe(false);
      await nodeA.stdout.waitFor((line) => line.includes('HTTP-invoked function registration refused') && line.includes('compat::outside'), 5000, 'the refusal log');
    });
  });

  describe('namespaces (iii 0.23 wire, not in iii-sdk 0.22.1)', () => {
    it('accepts `namespace` on registrations and calls without harm', async () => {
      const raw = await RawWorker.connect(nodeA.workerUrl);
      try {
        raw.send({ type: 'registerfunction', id: 'compat::ns', namespace: 'team-a' });
        raw.send({ type: 'registertrigger', id: 'ns-route', trigger_type: 'http', function_id: 'compat::ns', namespace: 'team-a', config: { api_path: 'compat/ns', http_method: 'GET' } });
        raw.serve('compat::ns', () => ({ status_code: 200, body: { served: 'namespaced' } }));
        const res = await waitForStatus(`${nodeA.httpUrl}/compat/ns`, (s) => s === 200);
        expect(res.json()).toEqual({ served: 'namespaced' });
        expect((await http(`${nodeA.httpUrl}/compat/ns`)).status).toBe(200);
      } finally {
        await raw.close();
      }
    });
  });
});
