// One trace from the client through a forward hop into an iii-sdk worker (docs/observability.md):
// a two-process engine exports its spans over OTLP/HTTP, relays the worker's /otel spans, and the
// OTLP receiver here reassembles the trace and checks every parent link.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForEveryProcess } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { startEngine, startWorker, stopAll, WORKER_READY_MS } from '../support/processes.js';
import { freePort } from '../support/redis.js';

const TRACE_ID = '5b8efff798038103d269b633813fc60c';
const CLIENT_SPAN = 'eee19b7ec3c1b174';

interface ExportedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  traceState: string;
}

/** OTLP JSON ids are hex (OTLP/JSON); some encoders use base64: normalise to hex. */
function hexId(value: unknown, bytes: number): string {
  if (typeof value !== 'string' || value === '') return '';
  if (new RegExp(`^[0-9a-f]{${bytes * 2}}$`, 'i').test(value)) return value.toLowerCase();
  return Buffer.from(value, 'base64').toString('hex');
}

/** Spans from an OTLP/HTTP JSON trace export (ExportTraceServiceRequest). */
function spansOf(body: string): ExportedSpan[] {
  const request = JSON.parse(body) as {
    resourceSpans?: { resource?: { attributes?: { key: string; value: { stringValue?: string } }[] }; scopeSpans?: { spans?: Record<string, unknown>[] }[] }[];
  };
  const out: ExportedSpan[] = [];
  for (const resourceSpans of request.resourceSpans ?? []) {
    const service = resourceSpans.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue ?? '';
    for (const scope of resourceSpans.scopeSpans ?? []) {
      for (const span of scope.spans ?? []) {
        out.push({
          service,
          traceId: hexId(span.traceId, 16),
          spanId: hexId(span.spanId, 8),
          parentSpanId: hexId(span.parentSpanId, 8),
          name: String(span.name),
          traceState: typeof span.traceState === 'string' ? span.traceState : '',
        });
      }
    }
  }
  return out;
}

describe('OTLP export: one trace from the client through a forward hop into an iii-sdk worker', () => {
  let receiver: Server;
  let engine: EngineHandle;
  let worker: WorkerHandle;
  const spans: ExportedSpan[] = [];
  const paths: string[] = [];

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        paths.push(req.url ?? '');
        if (req.url === '/v1/traces') spans.push(...spansOf(Buffer.concat(chunks).toString('utf8')));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    engine = await startEngine({
      cluster: { processes: 2 },
      logLevel: 'info',
      modules: [{ name: 'iii-observability', config: { enabled: true, service_name: 'switchyard-test', exporter: 'otlp', endpoint, sampling_ratio: 1 } }],
    });
    // The SDK's default telemetry: spans go to the engine's /otel.
    worker = startWorker('http-worker', engine.workerUrl, { OTEL_ENABLED: 'true', OTEL_SERVICE_NAME: 'http-worker' });
    await waitForEveryProcess(`${engine.httpUrl}/ready`, 2, (s) => s === 200, WORKER_READY_MS);
  });
  afterAll(async () => {
    await stopAll(worker, engine);
    receiver?.close();
  });

  it('links client span -> engine server span -> invocation span -> forwarded span -> worker span', async () => {
    // Fresh connections are dealt to both children: some requests are forwarded to the worker's child.
    for (let i = 0; i < 6; i++) {
      const res = await http(`${engine.httpUrl}/echo/${i}`, {
        headers: { connection: 'close', traceparent: `00-${TRACE_ID}-${CLIENT_SPAN}-01`, tracestate: 'vendor=abc' },
      });
      expect(res.status).toBe(200);
    }
    const inTrace = () => spans.filter((s) => s.traceId === TRACE_ID);
    const forwardedSpans = () => inTrace().filter((s) => s.name.startsWith('forwarded '));
    const workerSpans = () => inTrace().filter((s) => s.service !== 'switchyard-test');
    const servers = () => inTrace().filter((s) => s.parentSpanId === CLIENT_SPAN);
    // Each process and the worker export on their own schedule: wait for all of the trace.
    await waitUntil(() => servers().length >= 6 && forwardedSpans().length > 0 && workerSpans().length >= 6, 20_000, 'engine and worker spans of the trace');

    const byId = new Map(inTrace().map((s) => [s.spanId, s]));
    expect(servers()).toHaveLength(6);
    expect(servers().every((s) => s.service === 'switchyard-test' && s.name === 'GET /echo/:id')).toBe(true);
    // The client's tracestate rides on the engine's spans.
    expect(servers().map((s) => s.traceState)).toEqual(servers().map(() => 'vendor=abc'));
    // Each forwarded span is the child of an invocation span, itself the child of a server span.
    for (const forwarded of forwardedSpans()) {
      const invocation = byId.get(forwarded.parentSpanId);
      expect(invocation?.name).toBe('invoke api::echo');
      expect(byId.get(invocation?.parentSpanId ?? '')?.parentSpanId).toBe(CLIENT_SPAN);
    }
    // Every worker span hangs off an engine span of this trace (an invocation span, or a forwarded one).
    const workerRoots = workerSpans().filter((s) => byId.get(s.parentSpanId)?.service === 'switchyard-test');
    expect(workerRoots.length).toBeGreaterThanOrEqual(6);
    expect(workerRoots.some((s) => byId.get(s.parentSpanId)?.name.startsWith('forwarded '))).toBe(true);
    expect(paths).toContain('/v1/traces');
  });
});

describe('OTLP export to a collector that is down', () => {
  let engine: EngineHandle;
  let worker: WorkerHandle;

  beforeAll(async () => {
    // A port nothing listens on: every export fails.
    const endpoint = `http://127.0.0.1:${await freePort()}`;
    engine = await startEngine({
      logLevel: 'info',
      modules: [{ name: 'iii-observability', config: { enabled: true, exporter: 'otlp', endpoint, sampling_ratio: 1 } }],
    });
    worker = startWorker('http-worker', engine.workerUrl, { OTEL_ENABLED: 'true' });
    await waitForEveryProcess(`${engine.httpUrl}/ready`, 1, (s) => s === 200, WORKER_READY_MS);
  });
  afterAll(() => stopAll(worker, engine));

  it('loses only telemetry, counted: every request is answered', async () => {
    for (let i = 0; i < 20; i++) expect((await http(`${engine.httpUrl}/echo/${i}`)).status).toBe(200);
    const lost = async (): Promise<number> => {
      const text = (await http(`${engine.adminUrl}/metrics`)).text;
      const spans = /switchyard_trace_spans_total\{outcome="export_failed"\} (\d+)/.exec(text);
      return Number(spans?.[1] ?? 0);
    };
    await waitUntil(async () => (await lost()) > 0, 20_000, 'failed span exports to be counted');
    expect((await http(`${engine.httpUrl}/echo/last`)).status).toBe(200);
  });
});
