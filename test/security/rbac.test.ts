// Worker permissions with the real iii-sdk 0.22.1: an RBAC listener configured with iii's keys
// (iii-hq/iii at iii/v0.22.1: sdk/fixtures/config-test.yaml's second iii-worker-manager entry; the
// behaviour sdk/packages/node/iii/tests/rbac-workers.test.ts checks). Two engine processes share the
// ports, so trusted workers, the auth and hook functions and the RBAC workers land on either.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForEveryProcess } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';
import { freePort } from '../support/redis.js';

process.env.OTEL_ENABLED = 'false';
const { registerWorker, InvocationError } = await import('iii-sdk');
type Client = ReturnType<typeof registerWorker>;

const RECONNECT = { maxRetries: 0, initialDelayMs: 100, maxDelayMs: 200 };
// Below the test timeout, so a call that is never answered fails with the SDK's TIMEOUT, not a hung test.
const INVOCATION_TIMEOUT_MS = 10_000;

interface Seen {
  auth: Record<string, any>[];
  fnHook: Record<string, any>[];
  triggerHook: Record<string, any>[];
  typeHook: Record<string, any>[];
  middleware: Record<string, any>[];
}

describe('worker RBAC on a second iii-worker-manager listener (iii 0.22.1 keys and behaviour)', () => {
  let engine: EngineHandle;
  let trusted: Client;
  let rbacUrl: string;
  const clients: Client[] = [];
  const seen: Seen = { auth: [], fnHook: [], triggerHook: [], typeHook: [], middleware: [] };

  const connect = (headers: Record<string, string>, query = ''): Client => {
    const client = registerWorker(`${rbacUrl}${query}`, {
      headers,
      otel: { enabled: false },
      reconnectionConfig: RECONNECT,
      invocationTimeoutMs: INVOCATION_TIMEOUT_MS,
    });
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    const rbacPort = await freePort();
    rbacUrl = `ws://127.0.0.1:${rbacPort}`;
    engine = await startEngine({
      logLevel: 'info',
      cluster: { processes: 2 },
      modules: [
        {
          name: 'iii-worker-manager',
          config: {
            host: '127.0.0.1',
            port: rbacPort,
            middleware_function_id: 'shop::gate',
            rbac: {
              auth_function_id: 'shop::auth',
              on_function_registration_function_id: 'shop::on-function',
              on_trigger_registration_function_id: 'shop::on-trigger',
              on_trigger_type_registration_function_id: 'shop::on-trigger-type',
              expose_functions: ['match("shop::public::*")', 'match("engine::functions::list")', { metadata: { storefront: true } }],
            },
          },
        },
      ],
    });
    trusted = registerWorker(engine.workerUrl, { otel: { enabled: false } });
    trusted.registerFunction('shop::auth', (input: Record<string, any>) => {
      seen.auth.push(input);
      const token = input.headers?.['x-shop-token'];
      if (token === undefined) return Promise.resolve({ context: { user: 'guest' } });
      if (token === 'admin') {
        return Promise.resolve({ allowed_functions: ['shop::orders::admin'], allow_trigger_type_registration: true, context: { user: 'ada', role: 'admin' } });
      }
      if (token === 'limited') return Promise.resolve({ forbidden_functions: ['shop::public::prices'], context: { user: 'lin' } });
      if (token === 'tenant') return Promise.resolve({ function_registration_prefix: 'tenant-7', context: { user: 'tess' } });
      if (token === 'no-registration') return Promise.resolve({ allow_function_registration: false, context: { user: 'nora' } });
      return Promise.reject(new Error('unknown token'));
    });
    trusted.registerFunction('shop::gate', (input: Record<string, any>) => {
      seen.middleware.push(input);
      return trusted.trigger({ function_id: input.function_id, payload: { ...input.payload, caller: input.context?.user } });
    });
    trusted.registerFunction('shop::on-function', (input: Record<string, any>) => {
      seen.fnHook.push(input);
      if (String(input.function_id).includes('blocked')) return Promise.reject(new Error('not this one'));
      return Promise.resolve({ description: `checked for ${input.context?.user}` });
    });
    trusted.registerFunction('shop::on-trigger', (input: Record<string, any>) => {
      seen.triggerHook.push(input);
      if (String(input.function_id).includes('blocked')) return Promise.reject(new Error('no trigger for that'));
      return Promise.resolve({});
    });
    trusted.registerFunction('shop::on-trigger-type', (input: Record<string, any>) => {
      seen.typeHook.push(input);
      if (String(input.trigger_type_id).startsWith('blocked')) return Promise.reject(new Error('no type for that'));
      return Promise.resolve({});
    });
    trusted.registerFunction('shop::public::prices', (data: Record<string, any>) => Promise.resolve({ prices: [1, 2], seen: data }));
    trusted.registerFunction('shop::orders::admin', (data: Record<string, any>) => Promise.resolve({ admin: true, seen: data }));
    trusted.registerFunction('shop::catalog', (data: Record<string, any>) => Promise.resolve({ catalog: true, seen: data }), {
      metadata: { storefront: true },
    });
    trusted.registerFunction('shop::internal::ledger', () => Promise.resolve({ secret: true }));
    await waitUntil(
      async () => {
        const listed = await trusted.trigger<Record<string, never>, { functions: { function_id: string }[] }>({ function_id: 'engine::functions::list', payload: {} });
        return listed.functions.filter((f) => f.function_id.startsWith('shop::')).length === 9;
      },
      20_000,
      'the trusted worker registered everything',
    );
    // The list above is answered by the trusted worker's own process. An RBAC worker may land on the
    // other one, whose auth call fails (AUTH_ERROR, and the SDK, told not to retry, gives up) until the
    // registrations have reached it: a route registered after everything else, answered by every
    // process, says they have.
    trusted.registerFunction('ready::shop', () => Promise.resolve({ status_code: 200, body: 'ready' }));
    trusted.registerTrigger({ type: 'http', function_id: 'ready::shop', config: { api_path: 'shop-ready', http_method: 'GET' } });
    await waitForEveryProcess(`${engine.httpUrl}/shop-ready`, 2);
  });

  afterAll(async () => {
    await Promise.allSettled(clients.map((client) => client.shutdown()));
    await trusted?.shutdown();
    await engine?.stop();
  });

  it('calls what the session allows through the listener middleware, which gets the auth context', async () => {
    const admin = connect({ 'x-shop-token': 'admin' }, '/?tenant=a&tenant=b');
    const result = await admin.trigger<Record<string, unknown>, Record<string, any>>({ function_id: 'shop::orders::admin', payload: { n: 1 } });
    // The middleware's own call names it as the caller (iii adds _caller_worker_id to object payloads).
    expect(result).toEqual({ admin: true, seen: { n: 1, caller: 'ada', _caller_worker_id: expect.any(String) as unknown } });
    const call = seen.middleware.find((m) => m.function_id === 'shop::orders::admin');
    expect(call).toMatchObject({ function_id: 'shop::orders::admin', payload: { n: 1 }, context: { user: 'ada', role: 'admin' } });
    const auth = seen.auth.find((a) => a.headers?.['x-shop-token'] === 'admin');
    expect(auth?.query_params).toEqual({ tenant: ['a', 'b'] });
    expect(auth?.ip_address).toBe('127.0.0.1');
    // Exposed by metadata, and by pattern.
    await expect(admin.trigger({ function_id: 'shop::catalog', payload: {} })).resolves.toMatchObject({ catalog: true });
    await expect(admin.trigger({ function_id: 'shop::public::prices', payload: {} })).resolves.toMatchObject({ prices: [1, 2] });
  });

  it('refuses a call outside expose_functions with FORBIDDEN, as iii-sdk InvocationError', async () => {
    const guest = connect({});
    const error = await guest.trigger({ function_id: 'shop::internal::ledger', payload: {} }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(InvocationError);
    expect((error as InstanceType<typeof InvocationError>).code).toBe('FORBIDDEN');
    expect(String((error as Error).message)).toContain('shop::internal::ledger');
    expect(String((error as Error).message)).toContain('add to rbac.expose_functions');
  });

  it('forbidden_functions wins over expose_functions', async () => {
    const limited = connect({ 'x-shop-token': 'limited' });
    const error = await limited.trigger({ function_id: 'shop::public::prices', payload: {} }).catch((err: unknown) => err);
    expect((error as { code?: string }).code).toBe('FORBIDDEN');
    expect(String((error as Error).message)).toContain('remove from rbac.forbidden_functions');
  });

  it('lets the infrastructure functions through whatever expose_functions says', async () => {
    const guest = connect({});
    await expect(guest.trigger({ function_id: 'engine::log::info', payload: { message: 'hello from a guest' } })).resolves.toBeFalsy();
    await waitUntil(() => engine.stdout.json().some((line) => line.msg === 'hello from a guest'), 5000, 'the log line');
  });

  it('engine::functions::list shows only what the session may call', async () => {
    const admin = connect({ 'x-shop-token': 'admin' });
    const listed = await admin.trigger<Record<string, never>, { functions: { function_id: string }[] }>({ function_id: 'engine::functions::list', payload: {} });
    const ids = listed.functions.map((f) => f.function_id).filter((id) => id.startsWith('shop::'));
    expect(ids.sort()).toEqual(['shop::catalog', 'shop::orders::admin', 'shop::public::prices']);
  });

  it('hands the auth function query keys and headers named like Object.prototype members as plain data', async () => {
    const before = { err: engine.stderr.lines.length, out: engine.stdout.lines.length };
    const raw = await RawWorker.connect(`${rbacUrl}/?constructor=c&toString=t&__proto__=p&hasOwnProperty=h&constructor=c2`, { constructor: 'header-data' });
    try {
      const registered = await raw.ofType('workerregistered');
      expect(registered.worker_id).toEqual(expect.any(String));
      const auth = seen.auth.find((a) => a.query_params?.toString !== undefined && Array.isArray(a.query_params.toString));
      // `__proto__` is sent as a key like the others (test/unit/worker-session.test.ts); iii-sdk's own
      // decoding of the input makes it the object's prototype, so it is not compared here.
      expect({ ...auth?.query_params }).toEqual({ constructor: ['c', 'c2'], toString: ['t'], hasOwnProperty: ['h'] });
      expect(auth?.headers.constructor).toBe('header-data');
    } finally {
      await raw.close();
    }
    // Every process still serves (an exception in the upgrade would have ended the one that took it).
    await waitForEveryProcess(`${engine.httpUrl}/shop-ready`, 2);
    expect([...engine.stderr.lines.slice(before.err), ...engine.stdout.lines.slice(before.out)].join('\n')).not.toMatch(/TypeError|uncaught|exited/i);
  });

  it('refuses a connection the auth function refuses: an AUTH_ERROR frame, then the close', async () => {
    const raw = await RawWorker.connect(rbacUrl, { 'x-shop-token': 'stolen' });
    const frame = await raw.ofType('error');
    expect(frame.error).toMatchObject({ code: 'AUTH_ERROR' });
    expect(String(frame.error.message)).toContain('unknown token');
    await raw.closed;
    const metrics = await http(`${engine.adminUrl}/metrics`);
    expect(metrics.text).toMatch(/switchyard_worker_limit_hits_total\{reason="auth_refused"[^}]*\} [1-9]/);
  });

  it('runs the registration hooks with the session context: a refused function is not served, an accepted one is', async () => {
    const admin = connect({ 'x-shop-token': 'admin' });
    admin.registerFunction('shop::public::blocked', () => Promise.resolve({ reached: true }));
    admin.registerFunction('shop::public::offers', () => Promise.resolve({ offers: ['tea'] }));
    await waitUntil(() => seen.fnHook.some((h) => h.function_id === 'shop::public::offers'), 10_000, 'the function hook');
    expect(seen.fnHook.find((h) => h.function_id === 'shop::public::blocked')?.context).toEqual({ user: 'ada', role: 'admin' });
    await waitUntil(
      async () => (await trusted.trigger({ function_id: 'shop::public::offers', payload: {} }).catch(() => undefined)) !== undefined,
      10_000,
      'the accepted function to be served',
    );
    const refused = await trusted.trigger({ function_id: 'shop::public::blocked', payload: {} }).catch((err: unknown) => err);
    expect((refused as { code?: string }).code).toBe('function_not_found');
    const info = await trusted.trigger<Record<string, unknown>, Record<string, any>>({ function_id: 'engine::functions::info', payload: { function_id: 'shop::public::offers' } });
    expect(info.description).toBe('checked for ada');
  });

  it('refuses function registration when the session says so, without calling the hook', async () => {
    const before = seen.fnHook.length;
    const nora = connect({ 'x-shop-token': 'no-registration' });
    nora.registerFunction('shop::public::nora', () => Promise.resolve({}));
    await nora.trigger({ function_id: 'shop::public::prices', payload: {} });
    const refused = await trusted.trigger({ function_id: 'shop::public::nora', payload: {} }).catch((err: unknown) => err);
    expect((refused as { code?: string }).code).toBe('function_not_found');
    expect(seen.fnHook.length).toBe(before);
  });

  it('the trigger hook refuses a trigger: the worker gets FORBIDDEN and nothing is routed', async () => {
    const raw = await RawWorker.connect(rbacUrl, { 'x-shop-token': 'admin' });
    try {
      raw.send({ type: 'registertrigger', id: 'tr-blocked', trigger_type: 'http', function_id: 'shop::blocked', config: { api_path: 'blocked', http_method: 'GET' } });
      const result = await raw.next((f) => f.type === 'triggerregistrationresult' && f.id === 'tr-blocked', 10_000);
      expect(result.error.code).toBe('FORBIDDEN');
      expect(String(result.error.message)).toContain('no trigger for that');
      expect(seen.triggerHook.find((h) => h.trigger_id === 'tr-blocked')).toMatchObject({ trigger_type: 'http', function_id: 'shop::blocked', context: { user: 'ada' } });
      expect((await http(`${engine.httpUrl}/blocked`)).status).toBe(404);
    } finally {
      await raw.close();
    }
  });

  it('trigger types: refused without allow_trigger_type_registration; with it, the hook decides', async () => {
    const guest = connect({});
    guest.registerTriggerType({ id: 'guest-type', description: 'a guest type' }, { registerTrigger: async () => {}, unregisterTrigger: async () => {} });
    const admin = connect({ 'x-shop-token': 'admin' });
    admin.registerTriggerType({ id: 'blocked-type', description: 'refused by the hook' }, { registerTrigger: async () => {}, unregisterTrigger: async () => {} });
    admin.registerTriggerType({ id: 'admin-type', description: 'accepted' }, { registerTrigger: async () => {}, unregisterTrigger: async () => {} });
    const typeIds = async (): Promise<string[]> =>
      (await trusted.trigger<Record<string, never>, { triggers: { id: string }[] }>({ function_id: 'engine::triggers::list', payload: {} })).triggers.map((t) => t.id);
    await waitUntil(async () => (await typeIds()).includes('admin-type'), 10_000, 'the accepted trigger type');
    const ids = await typeIds();
    expect(ids).not.toContain('guest-type');
    expect(ids).not.toContain('blocked-type');
    expect(seen.typeHook.map((h) => h.trigger_type_id).sort()).toEqual(['admin-type', 'blocked-type']);
    expect(seen.typeHook[0]?.context).toMatchObject({ user: 'ada' });
  });

  it('function_registration_prefix: stored under prefix::id, called without it, unregistered with it', async () => {
    const tenant = connect({ 'x-shop-token': 'tenant' });
    const handle = tenant.registerFunction('echo', (data: unknown) => Promise.resolve({ echoed: data }));
    await waitUntil(
      async () => (await trusted.trigger({ function_id: 'tenant-7::echo', payload: { n: 7 } }).catch(() => undefined)) !== undefined,
      10_000,
      'the prefixed function',
    );
    await expect(trusted.trigger({ function_id: 'tenant-7::echo', payload: { n: 7 } })).resolves.toEqual({ echoed: { n: 7, _caller_worker_id: expect.any(String) as unknown } });
    handle.unregister();
    await waitUntil(
      async () => (await trusted.trigger({ function_id: 'tenant-7::echo', payload: {} }).catch((err: { code?: string }) => err.code)) === 'function_not_found',
      10_000,
      'the prefixed function to be gone',
    );
  });
});
