import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { expectErrorEnvelope } from '../support/assertions.js';
import { http, waitForEveryProcess, waitForStatus } from '../support/http.js';
import type { SimpleResponse } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { WORKER_READY_MS, startEngine, startWorker, stopAll } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';
import type { TcpProxy } from '../support/redis.js';
import { startTcpProxy } from '../support/redis.js';

/**
 * Faults, with real processes (docs/reliability.md). Covered elsewhere: a worker exiting mid-request
 * gets 502 at once (http-lifecycle.test.ts), graceful SIGTERM drain (http-lifecycle.test.ts), a
 * crashed child that owns no worker (cluster-embedded.test.ts), Redis restarts and outages and a
 * whole node killed (cluster-redis.test.ts), the chaos harness (chaos/, run by .ci/run).
 */

type Outcome = { status: number; elapsedMs: number; res: SimpleResponse } | { status: 'socket-error'; elapsedMs: number; error: string };

async function timed(url: string, headers: Record<string, string> = {}): Promise<Outcome> {
  const started = performance.now();
  try {
    const res = await http(url, { headers });
    return { status: res.status, elapsedMs: performance.now() - started, res };
  } catch (err) {
    return { status: 'socket-error', elapsedMs: performance.now() - started, error: String(err) };
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const proxyUrl = (proxy: TcpProxy) => `ws://127.0.0.1:${new URL(proxy.url).port}`;

function expectServed(outcome: Outcome): SimpleResponse {
  expect(outcome.status, outcome.status === 'socket-error' ? outcome.error : outcome.res.text).toBe(200);
  return (outcome as { res: SimpleResponse }).res;
}

describe('reconnect grace: an iii-sdk worker that reconnects serves the requests that waited for it', () => {
  const GRACE_MS = 2500;
  let engine: EngineHandle;
  let proxy: TcpProxy;
  let worker: WorkerHandle;

  beforeAll(async () => {
    engine = await startEngine({ workers: { reconnect_grace_ms: GRACE_MS } });
    proxy = await startTcpProxy(engine.ports.workers);
    worker = startWorker('reconnect-worker', proxyUrl(proxy));
    await waitForStatus(`${engine.httpUrl}/rc/echo/0`, (s) => s === 200, {}, WORKER_READY_MS);
  });
  afterAll(async () => {
    await stopAll(worker);
    await proxy?.close();
    await stopAll(engine);
  });

  const count = (text: string) => engine.stdout.lines.filter((l) => l.includes(text)).length;
  const disconnected = async (before: number) =>
    engine.stdout.waitFor(() => count('"worker disconnected"') > before, 5000, 'worker disconnected');

  it('holds requests while the worker is away (~1 s SDK backoff) and serves them once it reattached', async () => {
    const reattachedBefore = count('worker reattached');
    const disconnectsBefore = count('"worker disconnected"');
    proxy.cut();
    proxy.restore();
    await disconnected(disconnectsBefore);
    const outcomes = await Promise.all([1, 2, 3, 4].map((n) => timed(`${engine.httpUrl}/rc/echo/${n}`)));
    for (const [i, outcome] of outcomes.entries()) {
      expect(expectServed(outcome).json().n).toBe(String(i + 1));
      expect(outcome.elapsedMs).toBeLessThan(GRACE_MS);
    }
    // They did wait: the SDK's first reconnect comes after about a second.
    expect(Math.max(...outcomes.map((o) => o.elapsedMs))).toBeGreaterThan(300);
    expect(count('worker reattached')).toBeGreaterThan(reattachedBefore);
  });

  it('answers 503 FUNCTION_UNAVAILABLE with Retry-After once the grace is over, then 404 when the route expired', async () => {
    const disconnectsBefore = count('"worker disconnected"');
    proxy.cut(); // and stays cut: the worker cannot come back
    await disconnected(disconnectsBefore);
    const outcome = await timed(`${engine.httpUrl}/rc/echo/late`);
    expect(outcome.status).toBe(503);
    const res = (outcome as { res: SimpleResponse }).res;
    expectErrorEnvelope(res, 503, 'FUNCTION_UNAVAILABLE');
    expect(res.headers['retry-after']).toBe('1');
    expect(outcome.elapsedMs).toBeGreaterThan(300);
    expect(outcome.elapsedMs).toBeLessThan(GRACE_MS + 1500);
    await waitForStatus(`${engine.httpUrl}/rc/echo/gone`, (s) => s === 404, {}, GRACE_MS + 2000);
    proxy.restore();
    await waitForStatus(`${engine.httpUrl}/rc/echo/back`, (s) => s === 200, {}, WORKER_READY_MS);
  });
});

describe('heartbeat: a frozen (SIGSTOPped) worker is dropped within the configured bound', () => {
  let engine: EngineHandle;
  let worker: WorkerHandle;

  beforeAll(async () => {
    engine = await startEngine({
      workers: { heartbeat_interval_ms: 300, heartbeat_timeout_ms: 1500, reconnect_grace_ms: 0 },
    });
    worker = startWorker('reconnect-worker', engine.workerUrl);
    await waitForStatus(`${engine.httpUrl}/rc/echo/0`, (s) => s === 200, {}, WORKER_READY_MS);
  });
  afterAll(async () => {
    if (worker?.child.pid !== undefined) process.kill(worker.child.pid, 'SIGCONT');
    await stopAll(worker, engine);
  });

  it('ends an in-flight call with 502 WORKER_DISCONNECTED, not at the 30 s timeout; the worker comes back after SIGCONT', async () => {
    const pending = timed(`${engine.httpUrl}/rc/slow?ms=20000`, { 'x-request-id': 'frozen-1' });
    await worker.stdout.waitFor((l) => l === 'slow-start frozen-1');
    const pid = worker.child.pid as number;
    process.kill(pid, 'SIGSTOP');
    const stoppedAt = performance.now();
    const outcome = await pending;
    const afterStopMs = performance.now() - stoppedAt;
    expect(outcome.status).toBe(502);
    expectErrorEnvelope((outcome as { res: SimpleResponse }).res, 502, 'WORKER_DISCONNECTED');
    // Dropped between the timeout and timeout + 2 intervals after its last pong (1.5–2.1 s; the last
    // pong may have come up to one interval before the SIGSTOP).
    expect(afterStopMs).toBeGreaterThan(1100);
    expect(afterStopMs).toBeLessThan(5000);
    // The log line travels on a pipe and may arrive after the HTTP answer.
    await engine.stdout.waitFor((l) => l.includes('dropping it as frozen'), 5000, 'the heartbeat drop logged');
    process.kill(pid, 'SIGCONT');
    await waitForStatus(`${engine.httpUrl}/rc/echo/1`, (s) => s === 200, {}, WORKER_READY_MS);
    const metrics = await http(`${engine.adminUrl}/metrics`);
    expect(metrics.text).toMatch(/switchyard_workers_dropped_frozen_total 1\b/);
  });

  it('keeps a quiet but healthy worker: pongs count as signs of life', async () => {
    const drops = () => engine.stdout.lines.filter((l) => l.includes('dropping it as frozen')).length;
    const before = drops();
    // A second, idle worker counts the engine's pings: eight of them span more than the 1.5 s
    // timeout, with no traffic but pongs from either worker.
    const idle = await RawWorker.connect(engine.workerUrl);
    let pings = 0;
    idle.ws.on('ping', () => pings++);
    await waitUntil(() => pings >= 8, 10_000, 'eight heartbeat pings');
    expect(drops()).toBe(before);
    expect(idle.ws.readyState).toBe(WebSocket.OPEN);
    await idle.close();
    expect((await http(`${engine.httpUrl}/rc/echo/2`)).status).toBe(200);
  });
});

describe('cluster faults: processes: 2', () => {
  let engine: EngineHandle;
  const raws: RawWorker[] = [];

  beforeAll(async () => {
    engine = await startEngine({ cluster: { processes: 2 }, workers: { reconnect_grace_ms: 0 } });
  });
  afterEach(async () => {
    await Promise.all(raws.splice(0).map((w) => w.close()));
  });
  afterAll(async () => {
    await stopAll(engine);
  });

  /** The peer (child) holding a worker connection, from the admin view. */
  async function peerOf(workerId: string): Promise<string> {
    let found: { id: string; peer: string } | undefined;
    await waitUntil(async () => (found = (await http(`${engine.adminUrl}/workers`)).json<{ id: string; peer: string }[]>().find((w) => w.id === workerId)) !== undefined, 5000, `worker ${workerId} to be listed`);
    return found!.peer;
  }

  async function rawWorker(): Promise<{ worker: RawWorker; id: string; token: string }> {
    const worker = await RawWorker.connect(engine.workerUrl);
    raws.push(worker);
    const registered = await worker.ofType('workerregistered');
    return { worker, id: registered.worker_id as string, token: registered.reattach_token as string };
  }

  it('a reattach on another process retires the previous connection there', async () => {
    const first = await rawWorker();
    first.worker.route('ra::who', 'GET', '/ra/who');
    first.worker.serve('ra::who', () => ({ status_code: 200, body: 'first' }));
    await first.worker.sync();
    // The other child must hold this child's snapshot (it lists the first worker) before a reattach
    // there can find where to retire it: its route answering on both children shows that.
    await waitForEveryProcess(`${engine.httpUrl}/ra/who`, 2);
    const firstPeer = await peerOf(first.id);
    // Connections are dealt round-robin between the children: find one on the other child.
    let second = await rawWorker();
    second.worker.send({ type: 'registerfunction', id: `ra::probe-${second.id}` });
    while ((await peerOf(second.id)) === firstPeer) {
      second = await rawWorker();
      second.worker.send({ type: 'registerfunction', id: `ra::probe-${second.id}` });
    }
    // A wrong token changes nothing.
    second.worker.send({ type: 'reattach', previous_worker_id: first.id, reattach_token: 'not-the-token' });
    await engine.stdout.waitFor((l) => l.includes('retire request with a wrong reattach token ignored'));
    expect((await http(`${engine.httpUrl}/ra/who`)).text).toBe('"first"');

    // The right token: the old socket (half-open, as far as the engine could know) is closed by the engine.
    second.worker.send({ type: 'reattach', previous_worker_id: first.id, reattach_token: first.token });
    second.worker.route('ra::who', 'GET', '/ra/who');
    second.worker.serve('ra::who', () => ({ status_code: 200, body: 'second' }));
    const closed = await Promise.race([first.worker.closed, sleep(5000).then(() => 'still open')]);
    expect(closed).not.toBe('still open');
    await engine.stdout.waitFor((l) => l.includes('retired a connection whose worker reattached on another peer'));
    // The old connection never answers again; both children converge on the new one (the new
    // registration reaches the other child a few milliseconds later: 404 until then, grace is 0 here).
    let inARow = 0;
    await waitUntil(
      async () => {
        const res = await http(`${engine.httpUrl}/ra/who`, { headers: { connection: 'close' } });
        expect(res.text).not.toBe('"first"');
        inARow = res.text === '"second"' ? inARow + 1 : 0;
        return inARow === 6;
      },
      5000,
      'six answers in a row from the new connection',
    );
  });

  it('a child crash: its in-flight requests end at once, its workers reconnect to a sibling, the other child keeps serving', async () => {
    type Child = { pid: number; workers: number };
    const sdk = startWorker('reconnect-worker', engine.workerUrl);
    try {
      await waitForStatus(`${engine.httpUrl}/rc/echo/0`, (s) => s === 200, {}, WORKER_READY_MS);
      const children = async () => (await http(`${engine.adminUrl}/readyz`)).json().children as Child[];
      let list: Child[] = [];
      await waitUntil(async () => (list = await children()).reduce((n, c) => n + c.workers, 0) === 1, 5000, 'readyz to count the one worker');
      const victim = list.find((c) => c.workers === 1)?.pid as number;
      expect(victim).toBeGreaterThan(0);
      // A raw worker on the surviving child serves a route that must not notice the crash.
      let bystander = await rawWorker();
      bystander.worker.send({ type: 'registerfunction', id: `cc::probe-${bystander.id}` });
      const victimPeer = await peerOf((await http(`${engine.adminUrl}/workers`)).json().find((w: { name?: string }) => w.name === 'reconnect-worker').id);
      while ((await peerOf(bystander.id)) === victimPeer) {
        bystander = await rawWorker();
        bystander.worker.send({ type: 'registerfunction', id: `cc::probe-${bystander.id}` });
      }
      bystander.worker.route('cc::calm', 'GET', '/cc/calm');
      bystander.worker.serve('cc::calm', () => ({ status_code: 200, body: 'calm' }));
      await waitForStatus(`${engine.httpUrl}/cc/calm`, (s) => s === 200);

      // Four slow requests on fresh connections: dealt to both children, all handled on the victim.
      const slow = [1, 2, 3, 4].map((n) => timed(`${engine.httpUrl}/rc/slow?ms=15000`, { connection: 'close', 'x-request-id': `crash-${n}` }));
      await Promise.all([1, 2, 3, 4].map((n) => sdk.stdout.waitFor((l) => l === `slow-start crash-${n}`)));
      const calm = (async () => {
        const results: Outcome[] = [];
        for (let i = 0; i < 20; i++) {
          results.push(await timed(`${engine.httpUrl}/cc/calm`, { connection: 'close' }));
          await sleep(25);
        }
        return results;
      })();
      process.kill(victim, 'SIGKILL');
      const ended = await Promise.all(slow);
      for (const outcome of ended) {
        // Held by the dead child: the connection closes. Forwarded to it: 502.
        expect(outcome.status === 'socket-error' || outcome.status === 502, JSON.stringify(outcome.status)).toBe(true);
        expect(outcome.elapsedMs).toBeLessThan(8000);
      }
      expect(ended.some((o) => o.status === 'socket-error')).toBe(true);
      // Requests dealt to the dead child before the primary noticed may fail; the rest must be served.
      const calmResults = await calm;
      const calmOk = calmResults.filter((o) => o.status === 200).length;
      expect(calmOk).toBeGreaterThanOrEqual(calmResults.length - 2);
      // The SDK worker reconnects (to the sibling or the respawned child) and serves again.
      const back = await waitForStatus(`${engine.httpUrl}/rc/echo/1`, (s) => s === 200, {}, WORKER_READY_MS);
      expect(back.json().pid).toBe(sdk.child.pid);
    } finally {
      await stopAll(sdk);
    }
  });

  it('a primary crash takes the children with it: no orphans', async () => {
    const victim = await startEngine({ cluster: { processes: 2 } });
    const pids = ((await http(`${victim.adminUrl}/readyz`)).json().children as { pid: number }[]).map((c) => c.pid);
    expect(pids.length).toBe(2);
    process.kill(victim.child.pid as number, 'SIGKILL');
    await victim.exited;
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    await waitUntil(() => !pids.some(alive), 5000, 'the children to exit with their primary');
    expect(pids.filter(alive)).toEqual([]);
  });
});
