import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { Agent, request } from 'undici';
import { startEngine, spawnManaged, stopProcess } from '../../test/support/processes.js';
import type { EngineHandle, ManagedProcess } from '../../test/support/processes.js';
import { cpuNs, processGroup, rssMb, sampleRss } from '../../test/support/proc.js';
import { median } from '../lib/load.js';
import { RSS_LIMIT_MB, WORKERS_DIR, smoke } from '../lib/options.js';
import type { CheckGroup, ScaleRow } from '../lib/report.js';
import { int, ms } from '../lib/report.js';
import type { Baseline } from '../lib/subjects.js';
import { readyz, startBaseline, until } from '../lib/subjects.js';

/**
 * Streaming through response and request_body channels (docs/streaming.md), one engine process with
 * an iii-sdk worker using the `http()` helper (bench/workers/stream-worker.mjs), against baseline (6):
 * node:http relaying the same bytes to and from the same worker over one ws socket per body (iii's
 * channel sockets, minimally served), with back-pressure both ways. Transfers of 1 GiB alternate baseline / Switchyard over 5 rounds; the ratio is taken
 * within each round, then the median (as the load groups do).
 *   - download and upload MB/s (target ≥ 0.8 × the baseline);
 *   - SSE: events per second to one client, and the latency from the worker's write to the client's
 *     read (both processes stamp performance.timeOrigin + now, comparable on one machine);
 *   - 1,000 concurrent SSE clients on one process: the child's RSS with all of them open.
 */
const TRANSFER_BYTES = smoke ? 16 * 1024 * 1024 : 1024 * 1024 * 1024;
const ROUNDS = smoke ? 1 : 5;
const WARMUP_TRANSFERS = smoke ? 0 : 1;
const SSE_EVENTS = smoke ? 2_000 : 20_000;
const LATENCY_EVENTS = smoke ? 100 : 500;
const SSE_CLIENTS = smoke ? 100 : 1_000;
const CHUNK = Buffer.alloc(64 * 1024, 0x62);

interface Subject {
  origin: string;
  download: string;
  upload: string;
  /** The server-side processes (engine child, or the baseline's own process), for CPU per MiB. */
  server: number[];
}

/** One transfer: MB/s, and the server side's CPU per MiB moved (ms), which the CPUs' sharing does not skew. */
async function timed(subject: Subject, measure: (url: string) => Promise<number>, url: string): Promise<{ mbs: number; cpuMsPerMib: number }> {
  const before = subject.server.reduce((sum, pid) => sum + cpuNs(pid), 0);
  const mbs = await measure(url);
  const after = subject.server.reduce((sum, pid) => sum + cpuNs(pid), 0);
  return { mbs, cpuMsPerMib: (after - before) / 1e6 / (TRANSFER_BYTES / 1024 / 1024) };
}

/** One streamed download of `bytes` (the route's `?bytes=`); MiB per second. Also used by bench/upload-heap.ts. */
export async function download(url: string, bytes = TRANSFER_BYTES): Promise<number> {
  const started = performance.now();
  const res = await request(url, { headersTimeout: 60_000, bodyTimeout: 60_000 });
  let received = 0;
  for await (const chunk of res.body) received += (chunk as Buffer).length;
  if (received !== bytes) throw new Error(`download got ${received} of ${bytes} bytes`);
  return received / 1024 / 1024 / ((performance.now() - started) / 1000);
}

/** One streamed upload of `bytes` in 64 KiB chunks; MiB per second. Also used by bench/upload-heap.ts. */
export async function upload(url: string, bytes = TRANSFER_BYTES): Promise<number> {
  const started = performance.now();
  const body = Readable.from(
    (function* () {
      for (let sent = 0; sent < bytes; sent += CHUNK.length) yield CHUNK;
    })(),
  );
  const res = await request(url, { method: 'POST', body, headers: { 'content-type': 'application/octet-stream' }, headersTimeout: 60_000, bodyTimeout: 60_000 });
  const answer = (await res.body.json()) as { received: number };
  if (answer.received !== bytes) throw new Error(`upload delivered ${answer.received} of ${bytes} bytes`);
  return bytes / 1024 / 1024 / ((performance.now() - started) / 1000);
}

/** Reads an SSE response; each event's data is the time the worker wrote it. */
async function readEvents(url: string): Promise<{ events: number; seconds: number; latenciesMs: number[] }> {
  const started = performance.now();
  const res = await request(url, { headersTimeout: 60_000, bodyTimeout: 60_000 });
  const latenciesMs: number[] = [];
  let rest = '';
  for await (const chunk of res.body) {
    const now = performance.timeOrigin + performance.now();
    const blocks = (rest + String(chunk)).split('\n\n');
    rest = blocks.pop() ?? '';
    for (const block of blocks) if (block.startsWith('data: ')) latenciesMs.push(now - Number(block.slice(6)));
  }
  return { events: latenciesMs.length, seconds: (performance.now() - started) / 1000, latenciesMs };
}

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN;
};

/**
 * One engine process with the stream worker, its routes served. `childNodeArgs` replaces the
 * children's default V8 flags (bench/upload-heap.ts); without it the engine's default applies. So does
 * `streamHeapGrowingPercent` for cluster.stream_heap_growing_percent.
 */
export async function startEngineWithStreamWorker(
  childNodeArgs?: string[],
  streamHeapGrowingPercent?: number,
): Promise<{ engine: EngineHandle; worker: ManagedProcess; child: number; stop(): Promise<void> }> {
  const cluster = {
    processes: 1,
    ...(childNodeArgs === undefined ? {} : { child_node_args: childNodeArgs }),
    ...(streamHeapGrowingPercent === undefined ? {} : { stream_heap_growing_percent: streamHeapGrowingPercent }),
  };
  const engine = await startEngine({ cluster, logLevel: 'warn', api: { concurrency_request_limit: 4096 } });
  const worker = spawnManaged(process.execPath, [join(WORKERS_DIR, 'stream-worker.mjs')], { ...process.env, OTEL_ENABLED: 'false', III_URL: engine.workerUrl });
  const stop = async (): Promise<void> => {
    await stopProcess(worker, 'SIGTERM', 3000);
    await engine.stop();
  };
  try {
    await worker.stdout.waitFor((l) => l === 'registered', 20_000, 'stream worker registered');
    await until('/bench/download', 10_000, async () => {
      const res = await request(`${engine.httpUrl}/bench/download?bytes=1`);
      await res.body.dump();
      return res.statusCode === 200 ? true : undefined;
    });
    const child = (await readyz(engine)).children[0]?.pid as number;
    return { engine, worker, child, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Opens `count` SSE streams that stay open (an event a second); resolves once each got its first event. */
async function holdSseClients(origin: string, count: number): Promise<{ close(): Promise<void> }> {
  const agent = new Agent({ connections: count + 16 });
  const controllers: AbortController[] = [];
  await Promise.all(
    Array.from({ length: count }, async () => {
      const controller = new AbortController();
      controllers.push(controller);
      const res = await request(`${origin}/bench/sse-idle`, { dispatcher: agent, signal: controller.signal, headersTimeout: 60_000, bodyTimeout: 0 });
      const first = new Promise<void>((resolve) => res.body.once('data', () => resolve()));
      res.body.on('error', () => undefined);
      await first;
    }),
  );
  return {
    close: async () => {
      for (const controller of controllers) controller.abort();
      await agent.close();
    },
  };
}

async function streamingRows(): Promise<ScaleRow[]> {
  const baseline: Baseline = await startBaseline('6-stream.mjs');
  const sy = await startEngineWithStreamWorker();
  const rows: ScaleRow[] = [];
  try {
    const subjects: Record<'baseline' | 'switchyard', Subject> = {
      baseline: {
        origin: baseline.origin,
        download: `${baseline.origin}/bench/download?bytes=${TRANSFER_BYTES}`,
        upload: `${baseline.origin}/bench/upload`,
        server: processGroup(baseline.pid).filter((p) => !p.cmdline.includes('/bench/workers/')).map((p) => p.pid),
      },
      switchyard: { origin: sy.engine.httpUrl, download: `${sy.engine.httpUrl}/bench/download?bytes=${TRANSFER_BYTES}`, upload: `${sy.engine.httpUrl}/bench/upload`, server: [sy.child] },
    };
    for (const [what, measure] of [['download', download], ['upload', upload]] as const) {
      const results: Record<'baseline' | 'switchyard', { mbs: number; cpuMsPerMib: number }[]> = { baseline: [], switchyard: [] };
      // Warm-up, not measured: the first transfers of a fresh engine and worker run cold code (the
      // worker's CPU per byte halves after two of them).
      for (let warmup = 0; warmup < WARMUP_TRANSFERS; warmup++) for (const subject of ['baseline', 'switchyard'] as const) await measure(subjects[subject][what]);
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 === 0 ? (['baseline', 'switchyard'] as const) : (['switchyard', 'baseline'] as const);
        for (const subject of order) results[subject].push(await timed(subjects[subject], measure, subjects[subject][what]));
      }
      const ratio = median(results.switchyard.map((run, round) => run.mbs / (results.baseline[round]?.mbs as number)));
      const mbs = (side: 'baseline' | 'switchyard'): number => median(results[side].map((run) => run.mbs));
      const cpu = (side: 'baseline' | 'switchyard'): number => median(results[side].map((run) => run.cpuMsPerMib));
      rows.push({
        check: `(d) streamed ${what}, ${int(TRANSFER_BYTES / 1024 / 1024)} MiB, one process, iii-sdk http() worker`,
        result:
          `${mbs('switchyard').toFixed(0)} MB/s against baseline (6) ${mbs('baseline').toFixed(0)} MB/s (medians of ${ROUNDS} rounds): ${ratio.toFixed(2)} × (median of the per-round ratios); ` +
          `server CPU ${cpu('switchyard').toFixed(2)} against ${cpu('baseline').toFixed(2)} ms per MiB (${(cpu('switchyard') / cpu('baseline')).toFixed(2)} ×)`,
        target: '≥ 0.80 × (6)',
        pass: ratio >= 0.8,
      });
    }

    const burst = await readEvents(`${sy.engine.httpUrl}/bench/sse?count=${SSE_EVENTS}`);
    const paced = await readEvents(`${sy.engine.httpUrl}/bench/sse?count=${LATENCY_EVENTS}&gap_ms=5`);
    rows.push({
      check: '(e) SSE to one client through a response channel',
      result:
        `${int(burst.events / burst.seconds)} events/s (${int(burst.events)} events written back to back); ` +
        `one event every 5 ms: worker write → client read p50 ${ms(percentile(paced.latenciesMs, 50))} ms, p99 ${ms(percentile(paced.latenciesMs, 99))} ms (${paced.events} events)`,
      target: 'measured',
      pass: burst.events === SSE_EVENTS && paced.events === LATENCY_EVENTS ? undefined : false,
    });

  } finally {
    await sy.stop();
    await baseline.stop();
  }
  rows.push(await manySseClients());
  return rows;
}

/** On a fresh engine (the transfers above leave a larger heap behind): RSS with SSE_CLIENTS streams open. */
async function manySseClients(): Promise<ScaleRow> {
  const sy = await startEngineWithStreamWorker();
  try {
    const idleRss = rssMb(sy.child);
    const rss = sampleRss([sy.child], 250);
    const clients = await holdSseClients(sy.engine.httpUrl, SSE_CLIENTS);
    const heldRss = Math.max(0, ...rss.stop().values());
    await clients.close();
    return {
      check: `(f) ${int(SSE_CLIENTS)} concurrent SSE clients on one process`,
      result: `all ${int(SSE_CLIENTS)} received events; child RSS ${idleRss.toFixed(0)} MB idle → ${heldRss.toFixed(0)} MB with them open (${(((heldRss - idleRss) * 1024) / SSE_CLIENTS).toFixed(0)} KiB per stream)`,
      target: `RSS ≤ ${RSS_LIMIT_MB} MB`,
      pass: heldRss <= RSS_LIMIT_MB,
    };
  } finally {
    await sy.stop();
  }
}

export const streaming: CheckGroup = { kind: 'check', name: 'streaming: downloads, uploads, SSE', run: streamingRows };
