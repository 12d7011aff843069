/**
 * Instructions per request, one request at a time, counted by callgrind (docs/performance.md,
 * "Instructions per request"):
 *
 *   npx tsx bench/instructions.ts [--against <commit>] [--requests N] [--warmup N] [--functions K]
 *   npx tsx bench/instructions.ts --forwarded [--requests N] [--warmup N]
 *
 * Runs baseline (2) and the engine (one process, the raw worker, GET /bench/hello on one keep-alive
 * connection), each server under `valgrind --tool=callgrind` with V8 single-threaded, and counts the
 * instructions the server process runs in user space over N requests after a warm-up (instrumentation
 * is switched on and off around the window with callgrind_control). With --against, also the engine
 * built at that commit (bench/lib/against.ts). The worker and this load generator are not counted.
 *
 * Why: these virtual machines give `perf` no hardware counters, and the host's noise moves the
 * latency rows by more than a change to the engine's own work. An instruction count is the same
 * within a fraction of a percent run after run (V8's background compiler and marker are off, so
 * tiering does not depend on timing); it leaves out the kernel, cache misses and waiting, so it
 * prices the engine's own code, not the request's latency.
 *
 * `--forwarded` counts a request that crosses processes instead: one engine of two processes, the raw
 * worker on one of them, and two keep-alive connections, one pinned to each process (the response's
 * served-by header says which). The owner's child serving its own connection is the local count; the
 * other connection's requests are forwarded, and both children are counted over the same window (the
 * front, which serves HTTP and forwards, and the owner's hop). Same code as a crossing between nodes,
 * over a Unix socket instead of TCP, without Redis (whose timers fall inside a window 50 times slower
 * at random, and made a two-node count move twofold). V8's memory reducer is off in this mode (it
 * collects an idle process on a timer: the idle child's window), and the default warm-up is longer:
 * after 4,000 requests the forwarding path was still being compiled under --single-threaded.
 *
 * `--functions K` also prints each engine's K largest functions by the instructions they ran
 * themselves, V8's generated code named from a `--perf-basic-prof` map. That run is separate:
 * the map makes V8 lay out code differently, so its totals are not compared with the others.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Client } from 'undici';
import { ROOT } from '../test/support/processes.js';
import { engineBuiltAt } from './lib/against.js';
import { nameGeneratedCode, selfInstructions, totalInstructions } from './lib/callgrind.js';
import { BASELINES_DIR, ROUTES, WORKERS_DIR } from './lib/options.js';
import { HELLO } from './lib/requests.js';
import type { Served } from './lib/subjects.js';
import { openPinned, probe } from './lib/subjects.js';

const args = process.argv.slice(2);
const option = (name: string): string | undefined => {
  const at = args.indexOf(name);
  return at === -1 ? undefined : args[at + 1];
};
const REQUESTS = Number(option('--requests') ?? 2000);
const FORWARDED = args.includes('--forwarded');
const WARMUP = Number(option('--warmup') ?? (FORWARDED ? 15_000 : 4000));
const FUNCTIONS = Number(option('--functions') ?? 0);
const against = option('--against');
if (FORWARDED && (against !== undefined || FUNCTIONS > 0)) {
  throw new Error('--forwarded counts this checkout only: it takes neither --against nor --functions');
}
const V8_FLAGS = FORWARDED ? ['--single-threaded', '--no-memory-reducer'] : ['--single-threaded'];
const ENGINE_BIN = join(ROOT, 'bin', 'switchyard.js');

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const say = (text: string): void => void process.stderr.write(`[instructions] ${text}\n`);

function requireTool(tool: string): void {
  try {
    execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
  } catch {
    throw new Error(`${tool} not found: this tool needs valgrind (Debian package valgrind)`);
  }
}

/** The first match of `pattern` in the child's output, within `ms`. */
function lineOf(child: ChildProcess, pattern: RegExp, ms: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`no line matching ${pattern} within ${ms} ms: ${seen.slice(-500)}`)), ms);
    child.stdout?.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      const match = pattern.exec(seen);
      if (match !== null) {
        clearTimeout(timer);
        resolve(match[0]);
      }
    });
  });
}

interface Running {
  origin: string;
  /** The process whose instructions are counted (the baseline, or the engine's child). */
  counted: number;
  /** Every engine child, in /readyz's order (one for the baseline: itself). */
  children: number[];
  stop(): Promise<void>;
}

/** Runs node under callgrind; its working directory is the dumps' (V8 writes its log there with --perf-basic-prof). */
function valgrind(outPrefix: string, traceChildren: boolean, nodeArgs: string[], env: NodeJS.ProcessEnv = process.env): ChildProcess {
  const child = spawn(
    'valgrind',
    ['--tool=callgrind', '--instr-atstart=no', `--trace-children=${traceChildren ? 'yes' : 'no'}`, `--callgrind-out-file=${outPrefix}.%p`, process.execPath, ...V8_FLAGS, ...nodeArgs],
    { cwd: dirname(outPrefix), stdio: ['ignore', 'pipe', 'pipe'], detached: true, env },
  );
  child.stderr?.on('data', () => undefined);
  return child;
}

async function stopGroup(child: ChildProcess, others: ChildProcess[] = []): Promise<void> {
  for (const other of others) other.kill('SIGKILL');
  const exited = new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', () => resolve())));
  try {
    process.kill(-(child.pid as number), 'SIGTERM');
  } catch {
    return;
  }
  await Promise.race([exited, sleep(20_000)]);
  try {
    process.kill(-(child.pid as number), 'SIGKILL');
  } catch {
    // gone
  }
}

async function startBaseline(outPrefix: string): Promise<Running> {
  const child = valgrind(outPrefix, false, [join(BASELINES_DIR, '2-ws-worker.mjs')]);
  const line = await lineOf(child, /port=\d+/, 180_000);
  return { origin: `http://127.0.0.1:${line.slice('port='.length)}`, counted: child.pid as number, children: [child.pid as number], stop: () => stopGroup(child) };
}

async function startEngine(bin: string, outPrefix: string, perfMap: boolean, processes = 1): Promise<Running> {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-instructions-'));
  const configPath = join(dir, 'config.json');
  const admin = 20_000 + Math.floor(Math.random() * 20_000);
  const modules = [
    { class: 'modules::api::RestApiModule', config: { host: '127.0.0.1', port: 0 } },
    { class: 'modules::workers::WorkerModule', config: { host: '127.0.0.1', port: 0 } },
    { class: 'modules::admin::AdminModule', config: { host: '127.0.0.1', port: admin } },
    { class: 'modules::cluster::ClusterModule', config: { processes } },
  ];
  writeFileSync(configPath, JSON.stringify({ modules }));
  // With two processes the served-by header tells which one answered, and whether it forwarded. One
  // process sends no such header: what is counted is what a plain engine runs (and what --against
  // and the documented counts compare).
  const env = processes > 1 ? { ...process.env, SWITCHYARD_SERVED_BY_HEADER: '1' } : process.env;
  const child = valgrind(outPrefix, true, [...(perfMap ? ['--perf-basic-prof'] : []), bin, '--config', configPath, '--log-level', 'warn'], env);
  const deadline = Date.now() + 300_000;
  let ready: { http?: number; workers?: number; children?: { pid: number }[] } = {};
  while (ready.http === undefined || ready.workers === undefined || (ready.children?.length ?? 0) < processes) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the engine under valgrind was not ready (admin port ${admin})`);
    await sleep(500);
    try {
      ready = (await (await fetch(`http://127.0.0.1:${admin}/readyz`)).json()) as typeof ready;
    } catch {
      // not listening yet
    }
  }
  const children = (ready.children ?? []).map((c) => c.pid);
  const worker = spawn(process.execPath, [join(WORKERS_DIR, 'raw-worker.mjs')], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, III_URL: `ws://127.0.0.1:${ready.workers}`, ROUTES } });
  await lineOf(worker, /registered/, 120_000);
  return {
    origin: `http://127.0.0.1:${ready.http}`,
    counted: children[0] as number,
    children,
    stop: async () => {
      await stopGroup(child, [worker]);
      rmSync(dir, { recursive: true, force: true });
      // The primary's code map (valgrind runs node in its own process, so the pid is the primary's).
      if (perfMap) rmSync(`/tmp/perf-${child.pid as number}.map`, { force: true });
    },
  };
}

/**
 * WARMUP requests, then REQUESTS counted in each of `pids` (callgrind's counters zeroed and switched
 * on around them): each process's dump, read back from `outDir`.
 */
async function countedDumps(pids: readonly number[], outDir: string, one: () => Promise<void>): Promise<Map<number, string>> {
  for (let i = 0; i < WARMUP; i++) await one();
  for (const pid of pids) execFileSync('callgrind_control', ['--zero', String(pid)], { stdio: 'ignore' });
  for (const pid of pids) execFileSync('callgrind_control', ['--instr=on', String(pid)], { stdio: 'ignore' });
  for (let i = 0; i < REQUESTS; i++) await one();
  for (const pid of pids) execFileSync('callgrind_control', ['--instr=off', String(pid)], { stdio: 'ignore' });
  const dumps = new Map<number, string>();
  for (const pid of pids) {
    const before = new Set(readdirSync(outDir));
    execFileSync('callgrind_control', ['--dump', String(pid)], { stdio: 'ignore' });
    const name = readdirSync(outDir).find((file) => !before.has(file) && file.includes(`.${pid}.`));
    if (name === undefined) throw new Error(`no callgrind dump for process ${pid}`);
    dumps.set(pid, readFileSync(join(outDir, name), 'utf8'));
  }
  return dumps;
}

/** Runs `subject` under callgrind; returns the counted process's instructions per request (and its dump). */
async function count(label: string, start: (outPrefix: string) => Promise<Running>, outDir: string): Promise<{ perRequest: number; dump: string; pid: number }> {
  const outPrefix = join(outDir, label.replace(/[^a-z0-9]+/gi, '-'));
  say(`${label}: starting under callgrind`);
  const running = await start(outPrefix);
  const client = new Client(running.origin, { pipelining: 1 });
  const one = async (): Promise<void> => {
    const res = await client.request({ path: HELLO.path, method: 'GET' });
    await res.body.text();
    if (res.statusCode !== 200) throw new Error(`${label}: status ${res.statusCode}`);
  };
  let dump: string;
  try {
    say(`${label}: ${WARMUP} requests of warm-up, then ${REQUESTS} counted`);
    dump = (await countedDumps([running.counted], outDir, one)).get(running.counted) as string;
  } finally {
    await client.close();
    await running.stop();
  }
  return { perRequest: totalInstructions(dump) / REQUESTS, dump, pid: running.counted };
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

/**
 * Instructions per request of each of `pids` over REQUESTS requests after WARMUP, on a connection
 * pinned just before (the engine closes a keep-alive connection idle for 5 s, and the one that
 * replaced it could land on the other process); every answer must say it took the path asked for.
 */
async function window(origin: string, forwarded: boolean, pids: number[], outDir: string): Promise<Map<number, number>> {
  const tookPath = (served: Served): boolean => served.status === 200 && served.forwarded === forwarded;
  const [client] = (await openPinned(origin, 1, HELLO.path, tookPath)) as [Client];
  const one = async (): Promise<void> => {
    const served = await probe(client, HELLO.path);
    if (!tookPath(served)) throw new Error(`an answer not ${forwarded ? 'forwarded' : 'served locally'}: status ${served.status}, served by ${served.peer}`);
  };
  try {
    const dumps = await countedDumps(pids, outDir, one);
    return new Map([...dumps].map(([pid, dump]) => [pid, totalInstructions(dump) / REQUESTS]));
  } finally {
    await client.close();
  }
}

/** --forwarded: a request crossing processes against one served where the worker is (see the top). */
async function countForwarded(outDir: string): Promise<void> {
  say('engine, 2 processes: starting under callgrind');
  const running = await startEngine(ENGINE_BIN, join(outDir, 'forwarded'), false, 2);
  try {
    say(`local window: ${WARMUP} requests of warm-up, ${REQUESTS} counted`);
    const byLocal = await window(running.origin, false, running.children, outDir);
    say(`forwarded window: ${WARMUP} requests of warm-up, ${REQUESTS} counted`);
    const byForwarded = await window(running.origin, true, running.children, outDir);
    // The owner is the child that did the work while the connection served locally.
    const [owner, front] = [...byLocal].sort((a, b) => b[1] - a[1]).map(([pid]) => pid) as [number, number];
    const get = (counts: Map<number, number>, pid: number): number => counts.get(pid) as number;
    const localCount = get(byLocal, owner);
    const crossing = get(byForwarded, front) + get(byForwarded, owner);
    console.log(`\nInstructions per request, user space, one request at a time, one engine of two processes (${REQUESTS} requests after ${WARMUP} of warm-up, V8 ${V8_FLAGS.join(' ')}):\n`);
    console.log('| process | served locally | forwarded |');
    console.log('| --- | ---: | ---: |');
    console.log(`| the worker's process (owner) | ${fmt(localCount)} | ${fmt(get(byForwarded, owner))} |`);
    console.log(`| the other process (front) | ${fmt(get(byLocal, front))} (idle) | ${fmt(get(byForwarded, front))} |`);
    console.log(`| both | ${fmt(localCount + get(byLocal, front))} | ${fmt(crossing)} |`);
    console.log(`\nforwarded (both processes) ÷ served locally (the owner): ${(crossing / localCount).toFixed(3)}`);
  } finally {
    await running.stop();
  }
}

requireTool('valgrind');
requireTool('callgrind_control');
const outDir = mkdtempSync(join(tmpdir(), 'switchyard-callgrind-'));
if (FORWARDED) {
  await countForwarded(outDir);
  rmSync(outDir, { recursive: true, force: true });
  process.exit(0);
}
const engines: { label: string; bin: string }[] = [{ label: 'engine (this checkout)', bin: ENGINE_BIN }];
if (against !== undefined) {
  const built = engineBuiltAt(against);
  engines.push({ label: `engine at ${built.sha.slice(0, 8)}`, bin: built.bin });
}
const rows: { label: string; perRequest: number }[] = [];
rows.push({ label: 'baseline (2)', perRequest: (await count('baseline (2)', (out) => startBaseline(out), outDir)).perRequest });
for (const engine of engines) rows.push({ label: engine.label, perRequest: (await count(engine.label, (out) => startEngine(engine.bin, out, false), outDir)).perRequest });

const base = rows[0] as { perRequest: number };
console.log(`\nInstructions per request in the server process, user space, one request at a time (${REQUESTS} requests after ${WARMUP} of warm-up, V8 ${V8_FLAGS.join(' ')}):\n`);
console.log('| subject | instructions / request | ÷ baseline (2) |');
console.log('| --- | ---: | ---: |');
for (const row of rows) console.log(`| ${row.label} | ${fmt(row.perRequest)} | ${(row.perRequest / base.perRequest).toFixed(3)} |`);
if (rows.length === 3) {
  const [, now, then] = rows as [unknown, { perRequest: number }, { perRequest: number; label: string }];
  console.log(`\nthis checkout ÷ ${then.label}: ${(now.perRequest / then.perRequest).toFixed(3)} (${fmt(now.perRequest - then.perRequest)} instructions per request)`);
}

if (FUNCTIONS > 0) {
  for (const engine of engines) {
    const counted = await count(`${engine.label}, functions`, (out) => startEngine(engine.bin, out, true), outDir);
    const mapPath = `/tmp/perf-${counted.pid}.map`;
    const named = nameGeneratedCode(selfInstructions(counted.dump), readFileSync(mapPath, 'utf8'));
    rmSync(mapPath, { force: true });
    console.log(`\n${engine.label}: the ${FUNCTIONS} functions that ran the most instructions themselves, per request (a separate run with --perf-basic-prof: ${fmt(counted.perRequest)} in all)\n`);
    for (const [name, cost] of [...named].sort((a, b) => b[1] - a[1]).slice(0, FUNCTIONS)) console.log(`${fmt(cost / REQUESTS).padStart(8)}  ${name}`);
  }
}
rmSync(outDir, { recursive: true, force: true });
