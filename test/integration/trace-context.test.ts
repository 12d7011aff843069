// W3C trace context from the client to the worker (docs/observability.md): every invokefunction
// carries the request's traceparent and baggage, on the process that took the request and across a
// forward hop; worker-to-worker calls pass the caller's on; the access line names the trace.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForEveryProcess } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { InProcessEngine } from '../support/in-process.js';
import { startInProcessEngine } from '../support/in-process.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';

const CLIENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/;
type Frame = Record<string, any>;

describe('trace context on one process', () => {
  let engine: InProcessEngine;
  let worker: RawWorker;
  const seen: Frame[] = [];
  const served = (reply: unknown) => (_data: unknown, frame: Frame) => {
    seen.push(frame);
    return reply;
  };

  beforeAll(async () => {
    engine = await startInProcessEngine({ logLevel: 'info' });
    worker = await RawWorker.connect(engine.workerUrl);
    worker.route('tc::get', 'GET', '/tc');
    worker.serve('tc::get', served({ status_code: 200, body: { ok: true } }));
    worker.route('tc::mw', 'GET', '/tc-mw');
    worker.serve('tc::mw', served({ status_code: 200, body: 'handler' }));
    worker.send({ type: 'registerfunction', id: 'tc::middleware' });
    worker.send({ type: 'registertrigger', id: 'tc-mw-trigger', trigger_type: 'http_middleware', function_id: 'tc::middleware', config: { phase: 'onRequest', scope: { path: '/tc-mw' } } });
    worker.serve('tc::middleware', served({ action: 'continue' }));
    await worker.sync();
  });
  afterAll(async () => {
    await worker?.close();
    await engine?.stop();
  });

  /** The frames of `functionId`'s invocations served from now on. */
  const invocationsOf = (functionId: string) => {
    const from = seen.length;
    return () => seen.slice(from).filter((f) => f.function_id === functionId);
  };

  it("hands the client's traceparent and baggage to the handler and to middleware, and logs the trace id", async () => {
    const mw = invocationsOf('tc::middleware');
    const handler = invocationsOf('tc::mw');
    const res = await http(`${engine.httpUrl}/tc-mw`, { headers: { traceparent: CLIENT, baggage: 'tenant=acme,user=7' } });
    expect(res.status).toBe(200);
    expect(res.text).toBe('"handler"');
    for (const frame of [...mw(), ...handler()]) {
      expect(frame.traceparent).toBe(CLIENT);
      expect(frame.baggage).toBe('tenant=acme,user=7');
    }
    const line = await engine.stdout.waitFor((l) => l.includes('"msg":"request"') && l.includes('/tc-mw'), 5000, 'the access line');
    expect(JSON.parse(line)).toMatchObject({ trace_id: '4bf92f3577b34da6a3ce929d0e0e4736', span_id: '00f067aa0ba902b7' });
  });

  it('starts a new trace for a request without (or with an invalid) traceparent', async () => {
    for (const headers of [{}, { traceparent: 'not-a-trace' }] as Record<string, string>[]) {
      const frames = invocationsOf('tc::get');
      expect((await http(`${engine.httpUrl}/tc`, { headers })).status).toBe(200);
      expect(frames()).toHaveLength(1);
      const traceparent = frames()[0]?.traceparent as string;
      expect(traceparent).toMatch(TRACEPARENT);
      expect(traceparent).not.toContain('4bf92f3577b34da6a3ce929d0e0e4736');
    }
  });

  it("passes a worker's trace context on with its call to another worker", async () => {
    const callee = await RawWorker.connect(engine.workerUrl);
    try {
      const calleeSeen: Frame[] = [];
      callee.send({ type: 'registerfunction', id: 'tc::callee' });
      callee.serve('tc::callee', (_data: unknown, frame: Frame) => {
        calleeSeen.push(frame);
        return { called: true };
      });
      await callee.sync();
      worker.send({ type: 'invokefunction', invocation_id: 'w2w-1', function_id: 'tc::callee', data: {}, traceparent: CLIENT, baggage: 'k=v' });
      expect(await worker.next((f) => f.type === 'invocationresult' && f.invocation_id === 'w2w-1')).toMatchObject({ result: { called: true } });
      expect(calleeSeen).toMatchObject([{ traceparent: CLIENT, baggage: 'k=v' }]);
    } finally {
      await callee.close();
    }
  });
});

describe('trace context across a forward hop (two processes)', () => {
  let engine: EngineHandle;
  let worker: RawWorker;
  const seen: Frame[] = [];

  beforeAll(async () => {
    engine = await startEngine({ cluster: { processes: 2 }, logLevel: 'info' });
    worker = await RawWorker.connect(engine.workerUrl);
    worker.route('tcf::get', 'GET', '/tcf');
    worker.serve('tcf::get', (_data: unknown, frame: Frame) => {
      seen.push(frame);
      return { status_code: 200, body: 'ok' };
    });
    await worker.sync();
    await waitForEveryProcess(`${engine.httpUrl}/tcf`, 2);
  });
  afterAll(async () => {
    await worker?.close();
    await engine?.stop();
  });

  it('reaches the worker with the same traceparent whichever child took the request', async () => {
    seen.length = 0;
    // Fresh connections are dealt to both children: half of these are forwarded.
    for (let i = 0; i < 6; i++) {
      expect((await http(`${engine.httpUrl}/tcf`, { headers: { connection: 'close', traceparent: CLIENT, baggage: `i=${i}` } })).status).toBe(200);
    }
    expect(seen.map((f) => [f.traceparent, f.baggage])).toEqual([0, 1, 2, 3, 4, 5].map((i) => [CLIENT, `i=${i}`]));
    const forwarded = () => engine.stdout.json().filter((l) => l.msg === 'request' && l.forwarded === true && l.trace_id === '4bf92f3577b34da6a3ce929d0e0e4736');
    await waitUntil(() => forwarded().length > 0, 5000, 'a forwarded access line with the trace id');
  });
});
