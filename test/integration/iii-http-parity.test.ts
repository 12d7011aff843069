import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFLICT_SETTLE_MS } from '../../src/workers/conflict-refusals.js';
import { expectErrorEnvelope } from '../support/assertions.js';
import { http, waitForEveryProcess, waitForStatus } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { InProcessEngine } from '../support/in-process.js';
import { startInProcessEngine } from '../support/in-process.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { startEngine, startWorker, stopAll, WORKER_READY_MS } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';

/**
 * Where the spec is silent, the HTTP module does what iii 0.22.1 does (issue 22, docs/compatibility.md),
 * seen by an iii-sdk worker written as an iii app is, on a two-process engine: every request here is
 * sent on fresh connections, so both processes answer it.
 */
const PROCESSES = 2;

/** The same request on fresh connections until both processes have answered it (round-robin). */
async function onEveryProcess(url: string, init: Parameters<typeof http>[1] = {}) {
  const answers = [];
  for (let i = 0; i < PROCESSES * 2; i++) answers.push(await http(url, { ...init, headers: { ...init.headers, connection: 'close' } }));
  return answers;
}

describe('iii 0.22.1 HTTP behaviour, two processes', () => {
  let engine: EngineHandle;
  let worker: WorkerHandle;

  beforeAll(async () => {
    engine = await startEngine({ cluster: { processes: PROCESSES } });
    worker = startWorker('iii-parity-worker', engine.workerUrl);
    await waitForEveryProcess(`${engine.httpUrl}/parity/ready`, PROCESSES, (s) => s === 200, WORKER_READY_MS);
  });
  afterAll(() => stopAll(worker, engine));

  it('serves GET for a trigger without http_method, with trigger.path the pattern as registered', async () => {
    for (const res of await onEveryProcess(`${engine.httpUrl}/parity/default/7`)) {
      expect(res.status).toBe(200);
      expect(res.json()).toEqual({
        trigger: { type: 'http', path: 'parity/default/:id', method: 'GET' },
        path: '/parity/default/7',
        params: { id: '7' },
      });
    }
  });

  it('gives trigger.path as the worker registered the pattern (no leading slash added), as iii does', async () => {
    for (const res of await onEveryProcess(`${engine.httpUrl}/parity/registered/9`)) {
      expect(res.json()).toEqual({ trigger: { type: 'http', path: 'parity/registered/:id', method: 'GET' } });
    }
  });

  it('answers 405 with Allow for a path bound for other methods only', async () => {
    for (const res of await onEveryProcess(`${engine.httpUrl}/parity/post-only`)) {
      expectErrorEnvelope(res, 405, 'METHOD_NOT_ALLOWED');
      expect(res.headers.allow).toBe('DELETE, POST');
    }
    expect((await http(`${engine.httpUrl}/parity/post-only`, { method: 'POST' })).status).toBe(201);
    expectErrorEnvelope(await http(`${engine.httpUrl}/parity/unbound`), 404, 'NOT_FOUND');
  });

  it('sends {} for a result without body and null for body: null, as JSON; nothing for 204 and HEAD', async () => {
    for (const res of await onEveryProcess(`${engine.httpUrl}/parity/no-body`)) {
      expect([res.status, res.headers['content-type'], res.text]).toEqual([200, 'application/json', '{}']);
    }
    for (const res of await onEveryProcess(`${engine.httpUrl}/parity/null-body`)) {
      expect([res.status, res.headers['content-type'], res.text]).toEqual([200, 'application/json', 'null']);
    }
    const noContent = await http(`${engine.httpUrl}/parity/no-content`);
    expect([noContent.status, noContent.text, noContent.headers['content-type']]).toEqual([204, '', undefined]);
    const head = await http(`${engine.httpUrl}/parity/no-body`, { method: 'HEAD' });
    expect([head.status, head.text, head.headers['content-length']]).toEqual([200, '', '2']);
  });

  it('drops a handler header with CR, LF or another control character (or a bad name) with a warning, and sends the rest', async () => {
    for (const res of await onEveryProcess(`${engine.httpUrl}/parity/bad-header`, { headers: { 'x-request-id': 'bad-header' } })) {
      expect(res.status).toBe(200);
      expect(res.json()).toEqual({ sent: true });
      expect(res.headers['x-good']).toBe('yes');
      expect(res.headers['x-evil']).toBeUndefined();
      expect(res.headers['x-nul']).toBeUndefined();
      expect(res.headers.injected).toBeUndefined();
    }
    const warning = await engine.stdout.waitFor((line) => line.includes('invalid response headers dropped') && line.includes('bad-header'), 10_000);
    expect(warning).toContain('X-Evil');
  });

  it('runs the route condition before its middleware_function_ids, in iii\'s order', async () => {
    for (const res of await onEveryProcess(`${engine.httpUrl}/parity/ordered`)) expect(res.json()).toEqual({ order: ['condition', 'middleware'] });
  });

  it('runs the route condition before its middleware; a middleware that returns nothing lets the request go on, with a warning', async () => {
    for (const res of await onEveryProcess(`${engine.httpUrl}/parity/guarded`, { headers: { 'x-request-id': 'mw-nothing' } })) {
      expect(res.status).toBe(200);
      expect(res.json()).toEqual({ order: ['condition', 'middleware'] });
    }
    await engine.stdout.waitFor((line) => line.includes('middleware returned no result; continuing') && line.includes('mw-nothing'), 10_000);
  });

  it('answers a middleware that throws with the worker\'s envelope (500 invocation_failed), as iii does', async () => {
    for (const res of await onEveryProcess(`${engine.httpUrl}/parity/mw-throws`)) {
      const body = expectErrorEnvelope(res, 500, 'invocation_failed');
      expect(body.error.message).toBe('middleware exploded');
    }
  });

  it('refuses a conflicting route registration at once, saying "conflict"; the first route keeps serving', async () => {
    const raw = await RawWorker.connect(engine.workerUrl);
    try {
      raw.serve('conflict::a', () => ({ status_code: 200, body: { ok: true } }));
      raw.route('conflict::a', 'GET', 'parity/conflict/:listId/:userId');
      await raw.sync();
      await waitForEveryProcess(`${engine.httpUrl}/parity/conflict/l1/u1`, PROCESSES);
      const sent = performance.now();
      const triggerB = raw.route('conflict::b', 'GET', 'parity/conflict/:userId/:listId');
      const refusal = await raw.next((f) => f.type === 'triggerregistrationresult' && f.id === triggerB, 10_000);
      const elapsedMs = performance.now() - sent;
      expect(refusal.error.message.toLowerCase()).toContain('conflict');
      // Not after the cross-process settle time: this process holds both registrations.
      expect(elapsedMs).toBeLessThan(CONFLICT_SETTLE_MS);
      for (const res of await onEveryProcess(`${engine.httpUrl}/parity/conflict/l1/u1`)) expect(res.json()).toEqual({ ok: true });
    } finally {
      await raw.close();
    }
  });

  it('refuses at once a route conflicting with one a worker on the other process holds (every process holds the whole table)', async () => {
    const open: RawWorker[] = [];
    /** A new raw worker and the peer (engine process) it is connected to, from the admin view. */
    const connect = async (): Promise<{ raw: RawWorker; peer: string }> => {
      const raw = await RawWorker.connect(engine.workerUrl);
      open.push(raw);
      const { worker_id: workerId } = await raw.ofType('workerregistered');
      // A worker is in its process's snapshot once it registers something.
      raw.send({ type: 'registerfunction', id: `probe::${workerId}` });
      let peer: string | undefined;
      await waitUntil(
        async () => {
          const workers = (await http(`${engine.adminUrl}/workers`)).json<{ id: string; peer: string }[]>();
          peer = workers.find((w) => w.id === workerId)?.peer;
          return peer !== undefined;
        },
        10_000,
        `worker ${workerId} in the admin view`,
      );
      return { raw, peer: peer as string };
    };
    try {
      const holder = await connect();
      holder.raw.serve('sibling::a', () => ({ status_code: 200, body: { ok: 'a' } }));
      holder.raw.route('sibling::a', 'GET', 'parity/sibling/:listId/:userId');
      await holder.raw.sync();
      await waitForEveryProcess(`${engine.httpUrl}/parity/sibling/l1/u1`, PROCESSES);
      // Connections are dealt among the processes: connect until one lands on the other process.
      let other: RawWorker | undefined;
      for (let i = 0; i < 12 && other === undefined; i++) {
        const candidate = await connect();
        if (candidate.peer !== holder.peer) other = candidate.raw;
      }
      if (other === undefined) throw new Error('no connection landed on the other process');
      const sent = performance.now();
      const triggerId = other.route('sibling::b', 'GET', 'parity/sibling/:userId/:listId');
      const refusal = await other.next((f) => f.type === 'triggerregistrationresult' && f.id === triggerId, 10_000);
      const elapsedMs = performance.now() - sent;
      expect(refusal.error.message.toLowerCase()).toContain('conflict');
      // Not after the settle time kept for races: the holder's route was in this process's table.
      expect(elapsedMs).toBeLessThan(CONFLICT_SETTLE_MS);
      for (const res of await onEveryProcess(`${engine.httpUrl}/parity/sibling/l1/u1`)) expect(res.json()).toEqual({ ok: 'a' });
    } finally {
      await Promise.all(open.map((raw) => raw.close()));
    }
  });
});

describe('concurrency_request_limit: a waiting line, as iii waits for a slot', () => {
  let engine: InProcessEngine;
  let worker: WorkerHandle;
  const TIMEOUT_MS = 2500;

  beforeAll(async () => {
    engine = await startInProcessEngine({ api: { concurrency_request_limit: 1, concurrency_queue_limit: 1, default_timeout: TIMEOUT_MS } });
    worker = startWorker('iii-parity-worker', engine.workerUrl);
    await waitForStatus(`${engine.httpUrl}/parity/ready`, (s) => s === 200, {}, WORKER_READY_MS);
  });
  afterAll(() => stopAll(worker, engine));

  it('lets a request beyond the limit wait for the slot; 503 OVERLOADED only when the line is full', async () => {
    const holder = http(`${engine.httpUrl}/parity/slow?ms=1500`, { headers: { 'x-request-id': 'holder' } });
    await worker.stdout.waitFor((line) => line === 'slow-start holder', 10_000);
    // Two more: one takes the waiting line (1) and is served once the slot is free; the other finds
    // the line full and is refused at once (which one is which depends on arrival order).
    const more = await Promise.all([1, 2].map((i) => http(`${engine.httpUrl}/parity/no-body`, { headers: { 'x-request-id': `more-${i}` } })));
    const refused = more.find((res) => res.status === 503);
    const waited = more.find((res) => res.status !== 503);
    expect(refused, 'one request refused').toBeDefined();
    expectErrorEnvelope(refused!, 503, 'OVERLOADED');
    expect(refused!.headers['retry-after']).toBe('1');
    expect([waited?.status, waited?.text]).toEqual([200, '{}']);
    expect((await holder).status).toBe(200);
  });

  it('answers 504 TIMEOUT when the deadline passes while the request waits', async () => {
    const holder = http(`${engine.httpUrl}/parity/hold`, { headers: { 'x-request-id': 'hold' } });
    await worker.stdout.waitFor((line) => line === 'hold-start hold', 10_000);
    const started = performance.now();
    const waiting = await http(`${engine.httpUrl}/parity/no-body`, { headers: { 'x-request-id': 'waits-too-long' } });
    const body = expectErrorEnvelope(waiting, 504, 'TIMEOUT');
    expect(body.error.message).toContain('concurrency slot');
    expect(performance.now() - started).toBeGreaterThan(TIMEOUT_MS - 100);
    expectErrorEnvelope(await holder, 504, 'TIMEOUT');
  });
});
