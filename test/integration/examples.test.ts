import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForStatus } from '../support/http.js';
import type { EngineHandle, ManagedProcess } from '../support/processes.js';
import { ROOT, WORKER_READY_MS, spawnManaged, startEngine, stopProcess } from '../support/processes.js';

/**
 * The workers in examples/ run as they are documented: real processes, `node examples/<name>.mjs`, with
 * iii-sdk resolved from the repository's node_modules, against a real engine.
 */
const EXAMPLES = join(ROOT, 'examples');

function startExample(file: string, workerUrl: string, env: NodeJS.ProcessEnv = {}): ManagedProcess {
  return spawnManaged(process.execPath, [join(EXAMPLES, file)], {
    ...process.env,
    OTEL_ENABLED: 'false',
    III_URL: workerUrl,
    ...env,
  });
}

const running: ManagedProcess[] = [];
function example(file: string, workerUrl: string, env: NodeJS.ProcessEnv = {}): ManagedProcess {
  const p = startExample(file, workerUrl, env);
  running.push(p);
  return p;
}

/** Stops an example with SIGTERM and expects the clean exit the examples promise (code 0, no signal). */
async function expectCleanStop(p: ManagedProcess): Promise<void> {
  const result = await stopProcess(p, 'SIGTERM', 5000);
  expect(result, `stderr:\n${p.stderr.lines.join('\n')}`).toStrictEqual({ code: 0, signal: null });
}

const jsonLines = (p: ManagedProcess) => p.stdout.json();

describe('examples against one engine', () => {
  let engine: EngineHandle;

  beforeAll(async () => {
    engine = await startEngine({ logLevel: 'info' });
  });
  afterAll(async () => {
    await Promise.all(running.map((p) => stopProcess(p, 'SIGKILL')));
    await engine?.stop();
  });

  describe('hello-worker.mjs', () => {
    let hello: ManagedProcess;
    beforeAll(async () => {
      hello = example('hello-worker.mjs', engine.workerUrl);
      await waitForStatus(`${engine.httpUrl}/hello/ready`, (s) => s === 200, {}, WORKER_READY_MS);
    });

    it('serves GET /hello/:name with the name, the query and the request id', async () => {
      const res = await http(`${engine.httpUrl}/hello/world?lang=en`, { headers: { 'x-request-id': 'hello-rid-1' } });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.json()).toStrictEqual({ hello: 'world', query: { lang: 'en' }, requestId: 'hello-rid-1' });
    });

    it('only GET is routed: another method on its path is answered 405 with Allow', async () => {
      const res = await http(`${engine.httpUrl}/hello/world`, { method: 'POST', body: '{}' });
      expect(res.status).toBe(405);
      expect(res.headers.allow).toContain('GET');
    });

    it('shuts down cleanly on SIGTERM, and its route goes away', async () => {
      await expectCleanStop(hello);
      await waitForStatus(`${engine.httpUrl}/hello/world`, (s) => s === 404);
    });
  });

  describe('sse-worker.mjs', () => {
    let sse: ManagedProcess;
    beforeAll(async () => {
      sse = example('sse-worker.mjs', engine.workerUrl);
      await waitForStatus(`${engine.httpUrl}/ticks?count=1`, (s) => s === 200, {}, WORKER_READY_MS);
    });

    it('streams GET /ticks?count=3 as three Server-Sent Events', async () => {
      const res = await http(`${engine.httpUrl}/ticks?count=3`);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('text/event-stream');
      const events = res.text.split('\n\n').filter(Boolean);
      expect(events.map((event) => event.split('\n')[0])).toEqual(['id: 1', 'id: 2', 'id: 3']);
      expect(JSON.parse((events[2] as string).split('data: ')[1] as string)).toMatchObject({ tick: 3 });
    });

    it('shuts down cleanly on SIGTERM, and its route goes away', async () => {
      await expectCleanStop(sse);
      await waitForStatus(`${engine.httpUrl}/ticks`, (s) => s === 404);
    });
  });

  describe('middleware-worker.mjs', () => {
    const TOKEN = 'example-token-7f3a';
    let mw: ManagedProcess;
    const profile = () => `${engine.httpUrl}/secure/profile`;

    beforeAll(async () => {
      mw = example('middleware-worker.mjs', engine.workerUrl, { API_TOKEN: TOKEN });
      // The worker registers its middleware before the route, so once the route answers, the guard is on.
      await waitForStatus(profile(), (s) => s === 200, { headers: { authorization: `Bearer ${TOKEN}` } }, WORKER_READY_MS);
    });

    it('answers 401 without a token, before any route runs', async () => {
      const res = await http(profile(), { headers: { 'x-request-id': 'mw-no-token' } });
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
      expect(res.json()).toStrictEqual({ error: 'unauthorized', request_id: 'mw-no-token' });
    });

    it('answers 401 with a wrong token or another scheme', async () => {
      for (const authorization of [`Bearer ${TOKEN}x`, 'Bearer ', `Basic ${TOKEN}`, TOKEN]) {
        const res = await http(profile(), { headers: { authorization } });
        expect(res.status, authorization).toBe(401);
      }
    });

    it('guards every path under /secure/, matched or not', async () => {
      // onRequest runs before matching: an unknown path under /secure/ is refused, not reported as missing.
      expect((await http(`${engine.httpUrl}/secure/nothing-here`)).status).toBe(401);
      expect((await http(`${engine.httpUrl}/secure/nothing-here`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(404);
    });

    it('answers 200 with the token; the handler sees the identity the middleware put in the context', async () => {
      const res = await http(profile(), { headers: { authorization: `Bearer ${TOKEN}`, 'x-request-id': 'mw-with-token' } });
      expect(res.status).toBe(200);
      expect(res.json()).toStrictEqual({ user: { subject: 'token-holder' }, requestId: 'mw-with-token' });
    });

    it('logs one onResponse line per request with its request id, status and duration', async () => {
      await http(profile(), { headers: { 'x-request-id': 'mw-timing-401' } });
      await http(profile(), { headers: { authorization: `Bearer ${TOKEN}`, 'x-request-id': 'mw-timing-200' } });
      for (const [rid, status] of [['mw-timing-401', 401], ['mw-timing-200', 200]] as const) {
        const line = await mw.stdout.waitFor((l) => l.includes(`"request_id":"${rid}"`), 10_000, `onResponse line for ${rid}`);
        const entry = JSON.parse(line);
        expect(entry).toMatchObject({ msg: 'response', request_id: rid, method: 'GET', path: '/secure/profile', status });
        // The onRequest timing stamp reached onResponse through the context (also on the 401 path).
        expect(typeof entry.duration_ms).toBe('number');
        expect(entry.duration_ms).toBeGreaterThanOrEqual(0);
        expect(entry.duration_ms).toBeLessThan(10_000);
      }
      expect(jsonLines(mw).filter((l) => l.request_id === 'mw-timing-200')).toHaveLength(1);
    });

    it('refuses to start without API_TOKEN', async () => {
      const p = startExample('middleware-worker.mjs', engine.workerUrl, { API_TOKEN: '' });
      const result = await p.exited;
      expect(result.code).toBe(1);
      expect(p.stderr.lines.join('\n')).toContain('API_TOKEN');
    });

    it('shuts down cleanly on SIGTERM, and its guard goes with it', async () => {
      await expectCleanStop(mw);
      await waitForStatus(profile(), (s) => s === 404);
    });
  });
});

describe('replicated-worker.mjs: several copies behind one route (engine requiring a worker token)', () => {
  const WORKER_TOKEN = 'worker-token-9c1e';
  let engine: EngineHandle;
  const replicas: ManagedProcess[] = [];
  const url = (n: number) => `${engine.httpUrl}/replica?n=${n}`;

  beforeAll(async () => {
    engine = await startEngine({ logLevel: 'info', workers: { auth_token: WORKER_TOKEN } });
    for (const name of ['alpha', 'beta']) {
      replicas.push(example('replicated-worker.mjs', engine.workerUrl, { REPLICA_NAME: name, III_TOKEN: WORKER_TOKEN }));
    }
    await waitForStatus(url(0), (s) => s === 200, {}, WORKER_READY_MS);
  });
  afterAll(async () => {
    await Promise.all(running.map((p) => stopProcess(p, 'SIGKILL')));
    await engine?.stop();
  });

  it('both copies answer, each with its name, pid and own counter, echoing the caller counter', async () => {
    // Both registered: wait until each has connected (the first may have answered before the second).
    const seen = new Map<string, { pid: number; served: number[] }>();
    const deadline = Date.now() + WORKER_READY_MS;
    let n = 1;
    while (seen.size < 2 || n <= 12) {
      const res = await http(url(n), { headers: { 'x-request-id': `replica-${n}` } });
      expect(res.status).toBe(200);
      const body = res.json<{ replica: string; pid: number; served: number; n: string; requestId: string }>();
      expect(body.n).toBe(String(n));
      expect(body.requestId).toBe(`replica-${n}`);
      expect(res.headers['x-replica']).toBe(body.replica);
      const entry = seen.get(body.replica) ?? { pid: body.pid, served: [] as number[] };
      expect(body.pid).toBe(entry.pid);
      entry.served.push(body.served);
      seen.set(body.replica, entry);
      n++;
      if (Date.now() > deadline) throw new Error(`only ${[...seen.keys()].join(', ')} answered`);
    }
    expect([...seen.keys()].sort()).toStrictEqual(['alpha', 'beta']);
    const pids = new Set([...seen.values()].map((e) => e.pid));
    expect(pids).toStrictEqual(new Set(replicas.map((p) => p.child.pid)));
    for (const { served } of seen.values()) {
      // Each copy counts its own requests: strictly increasing, by one.
      expect(served).toStrictEqual(served.map((_, i) => served[0]! + i));
    }
  });

  it('a copy without the worker token is refused; the route is served by the others only', async () => {
    const refusals = () => engine.stdout.lines.filter((l) => l.includes('worker refused: missing or invalid token')).length;
    const before = refusals();
    const intruder = example('replicated-worker.mjs', engine.workerUrl, { REPLICA_NAME: 'intruder', III_TOKEN: 'wrong' });
    // The engine refuses its connection (and each retry): once it has, nothing of it can be registered.
    await engine.stdout.waitFor(() => refusals() > before, WORKER_READY_MS, 'the intruder to be refused');
    for (let n = 0; n < 8; n++) {
      const res = await http(url(100 + n));
      expect(res.status).toBe(200);
      expect(res.json().replica).not.toBe('intruder');
    }
    await stopProcess(intruder, 'SIGKILL');
  });

  it('when one copy stops (SIGTERM, clean exit) the other serves every request', async () => {
    const [alpha, beta] = replicas as [ManagedProcess, ManagedProcess];
    const disconnectsBefore = engine.stdout.lines.filter((l) => l.includes('"worker disconnected"')).length;
    await expectCleanStop(alpha);
    expect(jsonLines(alpha).some((l) => l.msg === 'replica stopping' && l.signal === 'SIGTERM')).toBe(true);
    // The process has exited; wait until the engine has seen its socket close too (until then a call
    // may still go to it: retrying such calls on another replica is reconnect-grace work).
    await engine.stdout.waitFor(() => engine.stdout.lines.filter((l) => l.includes('"worker disconnected"')).length > disconnectsBefore);
    for (let n = 0; n < 8; n++) {
      const res = await http(url(200 + n));
      expect(res.status).toBe(200);
      expect(res.json().replica).toBe('beta');
    }
    await expectCleanStop(beta);
    await waitForStatus(url(300), (s) => s === 404);
  });
});
