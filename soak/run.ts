/**
 * The memory soak (npm run soak [-- --minutes M]; docs/soak.md).
 *
 * Starts the built engine (embedded mode, 2 processes, admin port known), a long-lived iii-sdk worker
 * and a long-lived raw `ws` worker for the main routes, a steady paced load over loopback, and worker
 * churn (a worker every ~2 s living 5–20 s). Every sample it measures each engine process (the
 * primary and its children, found as child pids of the primary): heap used after a full GC (through
 * the inspector, see soak/lib/inspector.ts), RSS, open fds and open sockets. At the end it prints the
 * samples, the request and churn counts and the verdict (soak/lib/verdict.ts), writes everything as
 * JSONL to .soak-results/, and exits 1 unless memory and descriptors stayed flat and the load was
 * served as expected.
 *
 * Options: --minutes M (10), --warmup-seconds S (min(120, a third of the run)), --sample-seconds S
 * (10; 5 for runs under 5 minutes), --rps N (200), --connections N (8), --churn-interval-ms N (2000),
 * --heap-diff (heap snapshots of every process when the warm-up ends and before the load stops, saved
 * to .soak-results/, and what grew between them printed: the first step when a heap is not flat).
 */
import { createWriteStream } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Pool, request } from 'undici';
import type { LineLog } from '../test/support/processes.js';
import { ROOT, startEngine, stopProcess } from '../test/support/processes.js';
import { RawWorker } from '../test/support/raw-worker.js';
import { Churn, startSdkWorker, waitServed } from './lib/churn.js';
import type { HeapSummary } from './lib/heap-diff.js';
import { diff, summarize } from './lib/heap-diff.js';
import { heapSnapshot, InspectorDirectory, memoryAfterGc } from './lib/inspector.js';
import type { SoakRequest } from './lib/load.js';
import { jsonBody, newTally, send, startPacedLoad } from './lib/load.js';
import { childPids, descriptors, rssMb } from '../test/support/proc.js';
import type { ProcessSample } from './lib/verdict.js';
import { DEFAULT_TOLERANCES, judge } from './lib/verdict.js';

// ---------------------------------------------------------------------------------------------- options

function option(name: string, fallback: number): number {
  const args = process.argv.slice(2);
  const at = args.indexOf(`--${name}`);
  if (at === -1) return fallback;
  const value = Number(args[at + 1]);
  if (!Number.isFinite(value) || value <= 0) {
    console.error(`soak: --${name} needs a positive number`);
    process.exit(2);
  }
  return value;
}

const TOTAL_MS = option('minutes', 10) * 60_000;
const WARMUP_MS = option('warmup-seconds', Math.min(120, TOTAL_MS / 3000)) * 1000;
const SAMPLE_MS = option('sample-seconds', TOTAL_MS >= 5 * 60_000 ? 10 : 5) * 1000;
const RPS = option('rps', 200);
const CONNECTIONS = option('connections', 8);
const CHURN_INTERVAL_MS = option('churn-interval-ms', 2000);
const HEAP_DIFF = process.argv.includes('--heap-diff');
const PROCESSES = 2;
const ECHO_BODY = jsonBody(16 * 1024);
/** Share of requests that may be neither as expected nor a churn race before the run is invalid. */
const MAX_UNEXPECTED_SHARE = 0.01;
const DEPARTED_PROBE_DELAY_MS = 500;

const MB = 1024 * 1024;
/** The soak's clock starts when the load and the churn do (the engine is ready by then). */
let started = Date.now();
const elapsed = (): number => Date.now() - started;

// ------------------------------------------------------------------------------------------------ logs

/** Counts engine log lines by level and message (the access log by status), then drops them. */
class LogTally {
  readonly counts = new Map<string, number>();

  drain(log: LineLog, onLine?: (line: string) => void): void {
    const lines = log.lines.splice(0, log.lines.length);
    for (const line of lines) {
      onLine?.(line);
      let key: string;
      try {
        const entry = JSON.parse(line) as { level?: number; msg?: string; status?: number };
        const level = entry.level === 40 ? 'warn' : entry.level === 50 ? 'error' : entry.level === 60 ? 'fatal' : String(entry.level);
        key = entry.msg === 'request' ? `${level} request ${entry.status}` : `${level} ${entry.msg}`;
      } catch {
        if (/^(Debugger (listening|attached|ending)|For help, see|Waiting for the debugger)/.test(line)) continue;
        key = `text ${line.slice(0, 80)}`;
      }
      this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
    }
  }
}

// --------------------------------------------------------------------------------------------- samples

interface ReadyChild {
  index: number;
  pid: number;
  workers: number;
}

async function readyChildren(adminUrl: string): Promise<ReadyChild[]> {
  // reset: no keep-alive connection left on the primary between samples.
  const res = await request(`${adminUrl}/readyz`, { headersTimeout: 5000, bodyTimeout: 5000, reset: true });
  const body = (await res.body.json()) as { children?: ReadyChild[] };
  return body.children ?? [];
}

async function sampleProcess(tMs: number, name: string, pid: number, workers: number, inspectors: InspectorDirectory): Promise<ProcessSample> {
  // Descriptors first: the inspector session below is one more socket while it lasts.
  const { fds, sockets } = descriptors(pid);
  const rss = rssMb(pid) * 1024 * 1024;
  const url = await inspectors.urlOf(pid);
  if (url === undefined) throw new Error(`no inspector for ${name} (pid ${pid})`);
  const memory = await memoryAfterGc(url).catch((err: unknown) => {
    inspectors.forget(pid);
    throw err;
  });
  if (memory.pid !== pid) throw new Error(`inspector of ${name} answered for pid ${memory.pid}, expected ${pid}`);
  return { tMs, process: name, pid, heapUsedBytes: memory.heapUsedBytes, externalBytes: memory.externalBytes, rssBytes: rss, fds, sockets, workers };
}

const fmtMb = (bytes: number): string => (Number.isFinite(bytes) ? (bytes / MB).toFixed(1) : '-');
const pad = (text: string | number, width: number): string => String(text).padStart(width);

function row(tMs: number, samples: ProcessSample[], names: string[]): string {
  const cells = names.map((name) => {
    const s = samples.find((x) => x.process === name);
    if (s === undefined) return pad('-', 30);
    return `${pad(fmtMb(s.heapUsedBytes), 6)} ${pad(fmtMb(s.rssBytes), 6)} ${pad(s.fds, 4)} ${pad(s.sockets, 4)} ${pad(s.workers, 3)}`;
  });
  return `${pad(Math.round(tMs / 1000), 5)}s | ${cells.join(' | ')}`;
}

function header(names: string[]): string {
  const top = names.map((n) => n.padEnd(30)).join(' | ');
  const sub = names.map(() => `${pad('heapMB', 6)} ${pad('rssMB', 6)} ${pad('fds', 4)} ${pad('sock', 4)} ${pad('wk', 3)}`).join(' | ');
  return `${pad('', 6)} | ${top}\n${pad('time', 6)} | ${sub}`;
}

/** Engine counters (summed over label sets) that tell whether the churn exercised what it should. */
const COUNTERS = [
  'switchyard_http_requests_total',
  'switchyard_workers_dropped_frozen_total',
  'switchyard_worker_reconnects_total',
  'switchyard_reconnect_grace_waits_seconds_count',
  'switchyard_forward_errors_total',
  'switchyard_child_restarts_total',
];

async function readCounters(adminUrl: string): Promise<Record<string, number>> {
  const res = await request(`${adminUrl}/metrics`, { headersTimeout: 5000, bodyTimeout: 5000, reset: true });
  const text = await res.body.text();
  const sums: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const name = /^([a-z_]+)[{ ]/.exec(line)?.[1];
    if (name === undefined || !COUNTERS.includes(name)) continue;
    // Grace waits by outcome (served, expired, deadline): the other counters as one sum.
    const outcome = /outcome="([a-z]+)"/.exec(line)?.[1];
    const key = outcome === undefined ? name : `${name}{outcome="${outcome}"}`;
    sums[key] = (sums[key] ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sums;
}

/** Heap snapshots of every engine process, saved under `prefix`, summarised by process name. */
async function snapshotAll(
  targets: { name: string; pid: number }[],
  inspectors: InspectorDirectory,
  prefix: string,
): Promise<Map<string, HeapSummary>> {
  const summaries = new Map<string, HeapSummary>();
  for (const { name, pid } of targets) {
    const url = await inspectors.urlOf(pid);
    if (url === undefined) continue;
    const json = await heapSnapshot(url);
    await writeFile(`${prefix}-${name}.heapsnapshot`, json);
    summaries.set(name, summarize(json));
  }
  return summaries;
}

// -------------------------------------------------------------------------------------------------- run

async function main(): Promise<number> {
  const resultsDir = join(ROOT, '.soak-results');
  await mkdir(resultsDir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const jsonlPath = join(resultsDir, `soak-${stamp}.jsonl`);
  const jsonl = createWriteStream(jsonlPath);
  const record = (entry: Record<string, unknown>): void => {
    jsonl.write(`${JSON.stringify(entry)}\n`);
  };

  let interrupted = false;
  process.once('SIGINT', () => {
    interrupted = true;
    console.log('\nSIGINT: stopping early, the report follows');
  });

  console.log(
    `soak: ${TOTAL_MS / 60_000} min, warm-up ${WARMUP_MS / 1000} s, sample every ${SAMPLE_MS / 1000} s, ` +
      `${RPS} req/s on ${CONNECTIONS} connections, a worker every ~${CHURN_INTERVAL_MS} ms; engine with ${PROCESSES} processes`,
  );
  const engine = await startEngine({
    cluster: { processes: PROCESSES },
    env: { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --inspect=127.0.0.1:0`.trim() },
    logLevel: 'warn',
  });
  const primaryPid = engine.child.pid as number;
  const inspectors = new InspectorDirectory();
  const logs = new LogTally();
  const drainLogs = (): void => {
    logs.drain(engine.stdout);
    logs.drain(engine.stderr, (line) => inspectors.line(line));
  };
  record({ type: 'meta', startedAt: new Date().toISOString(), totalMs: TOTAL_MS, warmupMs: WARMUP_MS, sampleMs: SAMPLE_MS, rps: RPS, connections: CONNECTIONS, churnIntervalMs: CHURN_INTERVAL_MS, processes: PROCESSES, tolerances: DEFAULT_TOLERANCES, adminUrl: engine.adminUrl, node: process.version });
  console.log(`engine primary pid ${primaryPid}, http ${engine.httpUrl}, workers ${engine.workerUrl}, admin ${engine.adminUrl}`);

  // Long-lived workers: they keep the main routes up for the whole run.
  const mainWorker = startSdkWorker(engine.workerUrl, { ROLE: 'main' });
  const rawMain = await RawWorker.connect(engine.workerUrl);
  rawMain.route('soak::raw::hello', 'GET', '/soak/raw/hello');
  rawMain.serve('soak::raw::hello', () => ({ status_code: 200, headers: { 'content-type': 'application/json' }, body: { ok: true } }));
  for (const path of ['/soak/hello', '/soak/raw/hello']) {
    if (!(await waitServed(engine.httpUrl, path))) throw new Error(`long-lived route ${path} never served`);
  }

  // Probes of routes whose worker left, on their own connections so a probe that waits (a reconnect
  // grace period) does not hold up the steady load.
  const probePool = new Pool(engine.httpUrl, { connections: 4, pipelining: 1 });
  const probeTally = newTally();
  const probes = new Set<Promise<void>>();
  const churn = new Churn({
    workerUrl: engine.workerUrl,
    httpUrl: engine.httpUrl,
    intervalMs: CHURN_INTERVAL_MS,
    lifeMinMs: 5000,
    lifeMaxMs: 20_000,
    rawShare: 0.25,
    functions: 4,
    freezeShare: 0.2,
    // The engine's default heartbeat drops a silent worker 5–9 s after it froze.
    freezeMs: 10_000,
    onDeparted: (path) => {
      // Half a second after the worker is gone the engine has seen its socket close (or its heartbeat
      // dropped it): the answer is the reconnect grace's, or 404 once the route is gone; no race.
      const probe = new Promise((r) => setTimeout(r, DEPARTED_PROBE_DELAY_MS)).then(() => send(probePool, { label: 'departed', method: 'GET', path }, probeTally));
      probes.add(probe);
      void probe.finally(() => probes.delete(probe));
    },
  });

  let missing = 0;
  const pick = (): SoakRequest => {
    const r = Math.random() * 100;
    if (r < 35) return { label: 'hello', method: 'GET', path: '/soak/hello' };
    if (r < 50) return { label: 'echo', method: 'POST', path: '/soak/echo', body: ECHO_BODY };
    if (r < 60) return { label: 'raw', method: 'GET', path: '/soak/raw/hello' };
    // Unmatched paths are all different: nothing may be kept per path.
    if (r < 70) return { label: 'missing', method: 'GET', path: `/soak/nope/${++missing}` };
    if (r < 80) return { label: 'throw', method: 'GET', path: '/soak/throw' };
    const path = churn.randomRoute();
    return path === undefined ? { label: 'hello', method: 'GET', path: '/soak/hello' } : { label: 'churn', method: 'GET', path };
  };

  started = Date.now();
  churn.start();
  const load = startPacedLoad(engine.httpUrl, CONNECTIONS, RPS, pick);

  const samples: ProcessSample[] = [];
  const sampleErrors: string[] = [];
  const names = ['primary', ...Array.from({ length: PROCESSES }, (_, i) => `child${i}`)];
  console.log(header(names));
  let nextSampleAt = 0;
  let lastTargets: { name: string; pid: number; workers: number }[] = [];
  let heapBefore: Map<string, HeapSummary> | undefined;
  const snapshotPrefix = join(resultsDir, `soak-${stamp}`);
  while (elapsed() < TOTAL_MS && !interrupted) {
    const wait = nextSampleAt - elapsed();
    if (wait > 0) {
      await new Promise((r) => setTimeout(r, Math.min(wait, 500)));
      continue;
    }
    nextSampleAt += SAMPLE_MS;
    drainLogs();
    const round: ProcessSample[] = [];
    const roundAt = elapsed();
    try {
      const ready = await readyChildren(engine.adminUrl);
      const pids = childPids(primaryPid);
      const targets: { name: string; pid: number; workers: number }[] = [{ name: 'primary', pid: primaryPid, workers: 0 }];
      for (const pid of pids) {
        const child = ready.find((c) => c.pid === pid);
        targets.push({ name: child === undefined ? `child?${pid}` : `child${child.index}`, pid, workers: child?.workers ?? 0 });
      }
      lastTargets = targets;
      for (const target of targets) {
        try {
          round.push(await sampleProcess(roundAt, target.name, target.pid, target.workers, inspectors));
        } catch (err) {
          sampleErrors.push(`${Math.round(elapsed() / 1000)} s ${target.name}: ${(err as Error).message}`);
        }
      }
    } catch (err) {
      sampleErrors.push(`${Math.round(elapsed() / 1000)} s: ${(err as Error).message}`);
    }
    const context = { requests: load.tally.requests, churnAlive: churn.alive(), churned: churn.counts.started, warmup: elapsed() < WARMUP_MS };
    for (const s of round) {
      samples.push(s);
      record({ type: 'sample', ...s, ...context });
    }
    console.log(`${row(roundAt, round, names)}   req ${context.requests} churn alive ${context.churnAlive}${context.warmup ? ' (warm-up)' : ''}`);
    if (HEAP_DIFF && heapBefore === undefined && !context.warmup) {
      heapBefore = await snapshotAll(lastTargets, inspectors, `${snapshotPrefix}-start`);
      console.log(`heap snapshots taken (${[...heapBefore.keys()].join(', ')})`);
    }
  }
  const heapAfter = heapBefore === undefined ? undefined : await snapshotAll(lastTargets, inspectors, `${snapshotPrefix}-end`);

  // ---------------------------------------------------------------------------------------- teardown
  await churn.stop();
  await load.stop();
  await Promise.all([...probes]);
  // Once every call has ended (frozen workers dropped, probes answered), before the engine stops.
  const engineCounters = await readCounters(engine.adminUrl).catch((err: unknown) => {
    sampleErrors.push(`engine metrics: ${(err as Error).message}`);
    return {};
  });
  await probePool.close();
  await rawMain.close();
  await stopProcess(mainWorker, 'SIGTERM', 5000);
  drainLogs();
  const engineExit = await engine.stop();

  // ------------------------------------------------------------------------------------------ report
  const verdict = judge(samples, WARMUP_MS);
  const tally = load.tally;
  const unexpected = tally.unexpected + tally.transportErrors;
  const loadReasons: string[] = [];
  if (tally.ok === 0) loadReasons.push('no request was answered as expected');
  if (unexpected > tally.requests * MAX_UNEXPECTED_SHARE) {
    loadReasons.push(`${unexpected} requests answered neither as expected nor as a churn race (over ${MAX_UNEXPECTED_SHARE * 100} %)`);
  }
  const badProbes = probeTally.unexpected + probeTally.transportErrors;
  if (badProbes > 0) loadReasons.push(`${badProbes} departed-route probes answered something else than the grace's 503/500 or 404`);
  if (sampleErrors.length > 0) loadReasons.push(`${sampleErrors.length} sampling errors`);
  if (engineExit.code !== 0) loadReasons.push(`the engine exited with ${JSON.stringify(engineExit)} on SIGTERM`);
  const flat = verdict.flat && loadReasons.length === 0;

  console.log(`\nSamples (after ${WARMUP_MS / 1000} s warm-up the verdict uses them; heap is after a full GC):`);
  console.log(header(names));
  for (const t of [...new Set(samples.map((s) => s.tMs))]) {
    console.log(row(t, samples.filter((s) => s.tMs === t), names));
  }

  const seconds = elapsed() / 1000;
  console.log(`\nRequests: ${tally.requests} in ${seconds.toFixed(0)} s (${(tally.requests / seconds).toFixed(0)}/s): ${tally.ok} as expected, ${tally.race} churn races, ${tally.unexpected} unexpected, ${tally.transportErrors} transport errors`);
  const kinds = (t: typeof tally): void => {
    for (const [kind, { count, outcome }] of [...t.byKind].sort((a, b) => b[1].count - a[1].count)) {
      console.log(`  ${pad(count, 8)}  ${kind}${outcome === 'ok' ? '' : `  (${outcome === 'race' ? 'churn race' : outcome.toUpperCase()})`}`);
    }
  };
  kinds(tally);
  console.log(`Departed-route probes (${DEPARTED_PROBE_DELAY_MS} ms after a worker left): ${probeTally.requests}, ${probeTally.ok} as expected`);
  kinds(probeTally);
  const c = churn.counts;
  console.log(
    `Workers churned: ${c.started} started (${c.sdk} iii-sdk, ${c.raw} raw ws), ${c.ready} served, ${c.leftCleanly} left cleanly, ` +
      `${c.killed} killed, ${c.frozen} frozen (SIGSTOP until the heartbeat dropped them), ${c.failedToStart} never served`,
  );
  console.log(`Engine counters at the end: ${Object.entries(engineCounters).map(([k, v]) => `${k} ${v}`).join(', ')}`);
  console.log('Engine log lines (warn and above):');
  for (const [key, n] of [...logs.counts].sort((a, b) => b[1] - a[1])) console.log(`  ${pad(n, 8)}  ${key}`);
  for (const e of sampleErrors) console.log(`sampling error: ${e}`);
  const heapDiffs: Record<string, unknown> = {};
  for (const [name, after] of heapAfter ?? []) {
    const before = heapBefore?.get(name);
    if (before === undefined) continue;
    const d = diff(before, after);
    heapDiffs[name] = d;
    console.log(`\nHeap growth in ${name} from the end of the warm-up to the end (snapshots ${snapshotPrefix}-{start,end}-${name}.heapsnapshot): ${fmtMb(d.totalBytesGrowth)} MB`);
    for (const r of d.top) console.log(`  ${pad(r.bytesGrowth >= 0 ? `+${r.bytesGrowth}` : r.bytesGrowth, 10)} B ${pad(r.countGrowth >= 0 ? `+${r.countGrowth}` : r.countGrowth, 7)}  ${r.key}`);
    console.log(`  ${d.newStrings.count} strings only in the later snapshot, e.g.: ${d.newStrings.examples.map((e) => JSON.stringify(e)).join(', ')}`);
  }

  const t = DEFAULT_TOLERANCES;
  console.log(
    `\nVerdict (first vs last third after warm-up, medians; flat = heap growth < ${t.heapGrowthBytes / MB} MB or < ${t.heapGrowthRatio * 100} %, ` +
      `fds and sockets minus connected workers within ±${t.descriptorSlack}):`,
  );
  for (const p of verdict.processes) {
    console.log(
      `  ${p.process.padEnd(8)} heap ${fmtMb(p.heap.first)} → ${fmtMb(p.heap.last)} MB (${p.heap.growth >= 0 ? '+' : ''}${fmtMb(p.heap.growth)}), ` +
        `rss ${fmtMb(p.rss.first)} → ${fmtMb(p.rss.last)} MB, external ${fmtMb(p.external.first)} → ${fmtMb(p.external.last)} MB, ` +
        `fds-wk ${p.fds.first} → ${p.fds.last}, sockets-wk ${p.sockets.first} → ${p.sockets.last}: ${p.flat ? 'flat' : 'NOT FLAT'}`,
    );
  }
  for (const reason of [...verdict.reasons, ...loadReasons]) console.log(`  - ${reason}`);
  console.log(flat ? 'FLAT' : 'NOT FLAT');
  record({
    type: 'summary',
    flat,
    verdict,
    loadReasons,
    requests: { ...tally, byKind: Object.fromEntries(tally.byKind) },
    probes: { ...probeTally, byKind: Object.fromEntries(probeTally.byKind) },
    churn: c,
    engineCounters,
    logs: Object.fromEntries(logs.counts),
    sampleErrors,
    engineExit,
    heapDiffs,
  });
  await new Promise<void>((resolve) => jsonl.end(resolve));
  console.log(`samples: ${jsonlPath}`);
  return flat ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
