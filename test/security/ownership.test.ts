// An outsider and a hostile worker try to take what is not theirs (issue 15): routes, functions,
// other routes' credentials through middleware, and the engine's memory through limits. Legitimate
// workers keep serving throughout. Two engine processes share the ports.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../support/http.js';
import type { SimpleResponse } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';
import { freePort } from '../support/redis.js';

const TOKEN = 'trusted-workers-only';

/** Until four requests in a row on fresh connections (both processes, twice) pass `accept`. */
async function everyProcess(url: string, accept: (res: SimpleResponse) => boolean, init: { method?: string } = {}): Promise<void> {
  let run = 0;
  await waitUntil(
    async () => {
      const res = await http(url, { ...init, headers: { connection: 'close' } });
      run = accept(res) ? run + 1 : 0;
      return run >= 4;
    },
    10_000,
    `every process to answer ${url}`,
  );
}
const AUTH = { authorization: `Bearer ${TOKEN}` };

describe('route and function ownership, restricted middleware, per-worker limits', () => {
  let engine: EngineHandle;
  let publicUrl: string;
  let limitedUrl: string;
  const open: RawWorker[] = [];
  const worker = async (url: string, headers: Record<string, string> = {}): Promise<RawWorker> => {
    const w = await RawWorker.connect(url, headers);
    open.push(w);
    return w;
  };

  beforeAll(async () => {
    const [publicPort, limitedPort] = [await freePort(), await freePort()];
    publicUrl = `ws://127.0.0.1:${publicPort}`;
    limitedUrl = `ws://127.0.0.1:${limitedPort}`;
    engine = await startEngine({
      logLevel: 'info',
      cluster: { processes: 2 },
      workers: { auth_token: TOKEN },
      modules: [
        // A public listener: no auth function, so every connection is one principal; it may call nothing.
        { name: 'iii-worker-manager', config: { host: '127.0.0.1', port: publicPort, rbac: { expose_functions: [] } } },
        {
          name: 'iii-worker-manager',
          config: { host: '127.0.0.1', port: limitedPort, max_registrations: 4, max_calls_in_flight: 2, max_frames_per_second: 200, max_queued_bytes: 65536 },
        },
      ],
    });
  });

  afterAll(async () => {
    await Promise.allSettled(open.map((w) => w.close()));
    await engine?.stop();
  });

  it('refuses an outsider without the token on the main listener', async () => {
    const outsider = await RawWorker.connect(engine.workerUrl);
    expect((await outsider.closed).code).toBe(4401);
  });

  it("refuses a second registration of a route for another function; the owner keeps serving it", async () => {
    const owner = await worker(engine.workerUrl, AUTH);
    owner.serve('accounts::get', () => ({ status_code: 200, body: { from: 'owner' } }));
    owner.route('accounts::get', 'GET', 'accounts/:id');
    await everyProcess(`${engine.httpUrl}/accounts/1`, (r) => r.status === 200);

    const intruder = await worker(engine.workerUrl, AUTH);
    intruder.serve('steal::get', () => ({ status_code: 200, body: { from: 'intruder' } }));
    const triggerId = intruder.route('steal::get', 'GET', 'accounts/:account');
    const refusal = await intruder.next((f) => f.type === 'triggerregistrationresult' && f.id === triggerId, 10_000);
    expect(refusal.error.code).toBe('trigger_registration_failed');
    expect(String(refusal.error.message)).toContain('accounts::get');
    for (let i = 0; i < 20; i++) expect((await http(`${engine.httpUrl}/accounts/${i}`)).json()).toEqual({ from: 'owner' });
    const routes = (await http(`${engine.adminUrl}/routes`)).json<{ routes: { path: string; function_id: string; owner?: Record<string, unknown> }[] }>();
    const route = routes.routes.find((r) => r.path === '/accounts/:id');
    expect(route?.function_id).toBe('accounts::get');
    expect(route?.owner).toMatchObject({ principal: 'listener-0' });
    expect(JSON.stringify(routes)).not.toContain('steal::get');
  });

  it('a worker on the RBAC listener cannot join a function of the main listener (no share of its calls)', async () => {
    const owner = await worker(engine.workerUrl, AUTH);
    let ownerCalls = 0;
    owner.serve('payments::charge', () => {
      ownerCalls++;
      return { status_code: 200, body: { from: 'owner' } };
    });
    owner.route('payments::charge', 'POST', 'charge');
    await everyProcess(`${engine.httpUrl}/charge`, (r) => r.status === 200, { method: 'POST' });

    const hostile = await worker(publicUrl);
    let hostileCalls = 0;
    hostile.serve('payments::charge', () => {
      hostileCalls++;
      return { status_code: 200, body: { from: 'hostile' } };
    });
    hostile.send({ type: 'registerfunction', id: 'payments::charge' });
    await hostile.sync();
    await waitUntil(() => engine.stdout.json().some((l) => l.msg === 'function registration refused: held by another principal'), 10_000, 'the refusal');
    ownerCalls = 0;
    for (let i = 0; i < 30; i++) expect((await http(`${engine.httpUrl}/charge`, { method: 'POST' })).json()).toEqual({ from: 'owner' });
    expect(hostileCalls).toBe(0);
    expect(ownerCalls).toBe(30);
    const metrics = await http(`${engine.adminUrl}/metrics`);
    expect(metrics.text).toMatch(/switchyard_registration_conflicts_total\{kind="function"[^}]*\} [1-9]/);
  });

  it("middleware from the RBAC listener runs on its own routes only: it never sees another route's Authorization or Cookie", async () => {
    const owner = await worker(engine.workerUrl, AUTH);
    owner.serve('profile::get', () => ({ status_code: 200, body: { profile: true } }));
    owner.route('profile::get', 'GET', 'profile');
    const hostile = await worker(publicUrl);
    const seenHeaders: Record<string, unknown>[] = [];
    hostile.serve('spy::mw', (data) => {
      seenHeaders.push(data.request?.headers ?? {});
      return { action: 'continue' };
    });
    hostile.serve('spy::own', () => ({ status_code: 200, body: { own: true } }));
    hostile.send({ type: 'registerfunction', id: 'spy::mw' });
    hostile.send({ type: 'registertrigger', id: 'spy-scope', trigger_type: 'http_middleware', function_id: 'spy::mw', config: { scope: { path: '/*' }, phase: 'onRequest' } });
    hostile.send({ type: 'registertrigger', id: 'spy-pre', trigger_type: 'http_middleware', function_id: 'spy::mw', config: { phase: 'preHandler' } });
    hostile.route('spy::own', 'GET', 'spy-own');
    await everyProcess(`${engine.httpUrl}/spy-own`, (r) => r.status === 200);
    await everyProcess(`${engine.httpUrl}/profile`, (r) => r.status === 200);
    seenHeaders.length = 0;
    for (let i = 0; i < 10; i++) {
      const res = await http(`${engine.httpUrl}/profile`, { headers: { authorization: 'Bearer user-secret', cookie: 'session=abc' } });
      expect(res.status).toBe(200);
    }
    expect(seenHeaders).toEqual([]);
    // Its own route: its middleware runs (onRequest and preHandler).
    await http(`${engine.httpUrl}/spy-own`);
    expect(seenHeaders.length).toBe(2);
  });

  it('a reconnecting worker of the same principal takes its route back; another principal cannot during the grace', async () => {
    const first = await worker(engine.workerUrl, AUTH);
    first.serve('inventory::list', () => ({ status_code: 200, body: { v: 1 } }));
    first.route('inventory::list', 'GET', 'inventory');
    await everyProcess(`${engine.httpUrl}/inventory`, (r) => r.status === 200);
    await first.close();
    // Within the grace: the public listener's worker tries the route.
    const hostile = await worker(publicUrl);
    hostile.serve('grab::inventory', () => ({ status_code: 200, body: { hostile: true } }));
    const grabbed = hostile.route('grab::inventory', 'GET', 'inventory');
    const refusal = await hostile.next((f) => f.type === 'triggerregistrationresult' && f.id === grabbed, 10_000);
    expect(refusal.error.code).toBe('trigger_registration_failed');
    // The owner's principal comes back with a renamed function: it takes the route over.
    const second = await worker(engine.workerUrl, AUTH);
    second.serve('inventory::list-v2', () => ({ status_code: 200, body: { v: 2 } }));
    second.route('inventory::list-v2', 'GET', 'inventory');
    await everyProcess(`${engine.httpUrl}/inventory`, (r) => r.status === 200 && r.json<{ v?: number }>().v === 2);
  });

  describe('per-worker limits', () => {
    it('max_registrations: the fifth registration is refused and counted', async () => {
      const w = await worker(limitedUrl);
      for (let i = 0; i < 4; i++) w.send({ type: 'registerfunction', id: `lim::f${i}` });
      w.send({ type: 'registertrigger', id: 'lim-t', trigger_type: 'http', function_id: 'lim::f0', config: { api_path: 'lim', http_method: 'GET' } });
      const refusal = await w.next((f) => f.type === 'triggerregistrationresult' && f.id === 'lim-t', 10_000);
      expect(refusal.error.code).toBe('registration_limit');
      const metrics = await http(`${engine.adminUrl}/metrics`);
      expect(metrics.text).toMatch(/switchyard_worker_limit_hits_total\{reason="registrations"[^}]*\} [1-9]/);
    });

    it('max_calls_in_flight: the third concurrent call is answered too_many_calls at once', async () => {
      const server = await worker(engine.workerUrl, AUTH);
      server.send({ type: 'registerfunction', id: 'slow::never' });
      await server.sync();
      const caller = await worker(limitedUrl);
      // The caller may sit on the other process: wait until its process's table holds the
      // function (one answered call at a time, so no slot stays taken), or the first call
      // would be refused as unknown instead of waiting.
      let probe = 0;
      await waitUntil(
        async () => {
          const invocation_id = `10000000-0000-4000-8000-${String(++probe).padStart(12, '0')}`;
          caller.send({ type: 'invokefunction', invocation_id, function_id: 'engine::functions::list', data: {} });
          const listed = await caller.next((f) => f.type === 'invocationresult' && f.invocation_id === invocation_id, 5_000);
          return (listed.result?.functions ?? []).some((f: { function_id: string }) => f.function_id === 'slow::never');
        },
        10_000,
        'the caller\'s process to list slow::never',
      );
      for (let i = 0; i < 3; i++) caller.send({ type: 'invokefunction', invocation_id: `00000000-0000-4000-8000-00000000000${i}`, function_id: 'slow::never', data: {} });
      const refused = await caller.next((f) => f.type === 'invocationresult', 10_000);
      expect(refused.invocation_id).toBe('00000000-0000-4000-8000-000000000002');
      expect(refused.error.code).toBe('too_many_calls');
    });

    it('max_frames_per_second: a flood is slowed down, not dropped, and HTTP stays responsive', async () => {
      const w = await worker(limitedUrl);
      const started = Date.now();
      for (let i = 0; i < 600; i++) w.send({ type: 'ping' });
      let pongs = 0;
      await waitUntil(
        () => {
          pongs = w.frames.filter((f) => f.type === 'pong').length;
          return pongs === 600;
        },
        15_000,
        'every ping answered',
      );
      // 600 frames at 200 per second take at least two more seconds.
      expect(Date.now() - started).toBeGreaterThanOrEqual(1900);
      expect((await http(`${engine.adminUrl}/healthz`)).status).toBe(200);
    });

    it('max_queued_bytes: a worker that reads nothing is closed with 1008 instead of growing the engine', async () => {
      const w = await worker(limitedUrl);
      w.serve('stuck::fn', () => ({ status_code: 200, body: {} }));
      w.route('stuck::fn', 'POST', 'stuck');
      await w.sync();
      // Every process serves the route before the worker stops reading: a process that has not heard of
      // it yet answers 404 at once, and those requests' bytes never queue (CI once saw no close in 20 s).
      await everyProcess(`${engine.httpUrl}/stuck`, (r) => r.status === 200, { method: 'POST' });
      (w.ws as unknown as { _socket: { pause(): void } })._socket.pause();
      // Requests with 64 KiB bodies queue towards it, in waves until it is closed: how much the kernel's
      // socket buffers take before anything queues in the engine depends on the machine (loopback
      // receive buffers grow to tcp_rmem's maximum), so no fixed count is enough everywhere.
      const body = JSON.stringify({ pad: 'x'.repeat(64 * 1024) });
      let closed: { code: number } | undefined;
      void w.closed.then((c) => (closed = c));
      const requests: Promise<unknown>[] = [];
      for (let wave = 0; wave < 40 && closed === undefined; wave++) {
        for (let i = 0; i < 50; i++) {
          requests.push(http(`${engine.httpUrl}/stuck`, { method: 'POST', body, headers: { 'content-type': 'application/json' } }).catch(() => undefined));
        }
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      expect(closed, 'the worker was not closed after 2,000 requests of 64 KiB').toBeDefined();
      expect([1006, 1008]).toContain(closed?.code);
      await Promise.all(requests);
      await waitUntil(() => engine.stdout.json().some((l) => String(l.msg).includes('max_queued_bytes')), 5000, 'the log line');
    });
  });
});
