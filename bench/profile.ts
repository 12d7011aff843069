/**
 * CPU-profiles the engine under one benchmark load (docs/performance.md, "How to profile").
 *
 *   npm run bench:profile -- [--middleware] [--body 1k|64k] [--sdk [--shipped]] [--connections N]
 *                            [--worker-prof] [--interval-us N] [--seconds N] [--out DIR] [--against COMMIT]
 *                            [--window cpu|heap|cpu,heap|snapshot] [--gc] [--node-args "FLAGS"] [--redis]
 *   npm run bench:profile -- --baseline 2-ws-worker.mjs --window cpu|heap|cpu,heap [--seconds N] [--connections N]
 *
 * Starts a one-process engine with `--cpu-prof` (primary and child write a .cpuprofile into DIR when
 * they exit), one bench worker, and runs the closed-loop load for N seconds (default 8) over N
 * connections (default 64). `--shipped` runs the iii-sdk worker as shipped (OpenTelemetry on);
 * `--worker-prof` profiles the worker process too; `--against COMMIT` profiles the engine built at
 * COMMIT instead (bench/lib/against.ts), to compare where a regression went. Prints the
 * profile files and the load's throughput; open them in Chrome DevTools or summarise them with
 * `npx tsx bench/profile.ts --summary FILE [--requests N]`.
 *
 * `--window cpu|heap|cpu,heap` profiles the engine's child over the measured window only (not start-up,
 * warm-up or shutdown; bench/lib/window-profiler.mjs) and prints the summary per request: CPU µs per
 * request by function, and with `heap` the bytes each function allocated per request (V8's sampling
 * heap profiler, collected objects included). The child's CPU per request from /proc is printed beside
 * it (main thread; and user and system time of all its threads, the GC's helpers included): the
 * profiler's own cost is in those figures. `snapshot` writes a heap snapshot at the window's end.
 * `--gc` runs the engine with --trace-gc-nvp and prints, per request of the window, the scavenges
 * and mark-compacts, their pauses, and the bytes that survived a scavenge and were promoted to the old
 * generation: what outlives a request drives the GC's cost (docs/performance.md, issue 26).
 *
 * `--baseline FILE` profiles a baseline of bench/baselines/ (its own process, not its worker) over the
 * same window with the same load on its GET route, summarised the same way: the engine's profile
 * beside the limit it is measured against (docs/performance.md, issue 26, third session of 2026-11-27).
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { childPids, cpuNs } from '../test/support/proc.js';
import { spawnManaged, startEngine, stopProcess } from '../test/support/processes.js';
import { startRedisServer } from '../test/support/redis.js';
import { engineBuiltAt } from './lib/against.js';
import { runLoad } from './lib/load.js';
import { startBaseline } from './lib/subjects.js';
import { jsonBody } from './lib/requests.js';

const args = process.argv.slice(2);
const flag = (name: string): boolean => args.includes(name);
const option = (name: string): string | undefined => {
  const at = args.indexOf(name);
  return at === -1 ? undefined : args[at + 1];
};

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
}

const nameOf = (callFrame: ProfileNode['callFrame']): string => {
  const { functionName, url, lineNumber } = callFrame;
  const where = url === '' ? '' : ` ${url.replace(/^.*\/(node_modules|src|dist)\//, '$1/')}:${lineNumber + 1}`;
  return `${functionName === '' ? '(anonymous)' : functionName}${where}`;
};

/**
 * Self and total per function (top `top` of each) from a call tree: `own` is a node's own weight
 * (samples, bytes). A function's total counts its callees once per stack even when recursive.
 */
function byFunction<N>(root: N, children: (node: N) => N[], name: (node: N) => string, own: (node: N) => number): { self: Map<string, number>; inclusive: Map<string, number>; sum: number } {
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const walk = (node: N, onStack: Set<string>): number => {
    const fn = name(node);
    const mine = own(node);
    self.set(fn, (self.get(fn) ?? 0) + mine);
    const nested = onStack.has(fn);
    if (!nested) onStack.add(fn);
    let sum = mine;
    for (const child of children(node)) sum += walk(child, onStack);
    if (!nested) {
      onStack.delete(fn);
      inclusive.set(fn, (inclusive.get(fn) ?? 0) + sum);
    }
    return sum;
  };
  const sum = walk(root, new Set());
  return { self, inclusive, sum };
}

function printTop(title: string, weights: Map<string, number>, format: (weight: number) => string, top = 40): void {
  console.log(title);
  for (const [name, weight] of [...weights.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${format(weight)}  ${name}`);
}

/**
 * Self and total time per function (top 40 of each), from a .cpuprofile; with `requests`, as µs per
 * request (the profile's own span divided by its samples), else as a share of the samples.
 */
async function summarise(file: string, requests?: number): Promise<void> {
  if (file.endsWith('.heapprofile')) return summariseHeap(file, requests);
  const profile = JSON.parse(await readFile(file, 'utf8')) as { nodes: ProfileNode[]; samples: number[]; startTime: number; endTime: number };
  const total = profile.samples.length;
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const { self, inclusive } = byFunction(
    nodes.get(profile.nodes[0]?.id as number) as ProfileNode,
    (node) => (node.children ?? []).map((id) => nodes.get(id) as ProfileNode),
    (node) => nameOf(node.callFrame),
    (node) => node.hitCount ?? 0,
  );
  const usPerSample = (profile.endTime - profile.startTime) / total;
  const format =
    requests === undefined
      ? (hits: number): string => `${((hits / total) * 100).toFixed(1).padStart(5)} %`
      : (hits: number): string => `${((hits * usPerSample) / requests).toFixed(2).padStart(7)} µs/req ${((hits / total) * 100).toFixed(1).padStart(5)} %`;
  printTop('self time', self, format);
  printTop('total time (with callees)', inclusive, format);
}

/** Bytes allocated per function (self: where the allocation happened; total: with callees), from a .heapprofile. */
async function summariseHeap(file: string, requests?: number): Promise<void> {
  const profile = JSON.parse(await readFile(file, 'utf8')) as { head: HeapNode };
  const { self, inclusive, sum } = byFunction(profile.head, (node) => node.children, (node) => nameOf(node.callFrame), (node) => node.selfSize);
  const format =
    requests === undefined
      ? (bytes: number): string => `${(bytes / 1e6).toFixed(2).padStart(9)} MB ${((bytes / sum) * 100).toFixed(1).padStart(5)} %`
      : (bytes: number): string => `${(bytes / requests).toFixed(0).padStart(6)} B/req ${((bytes / sum) * 100).toFixed(1).padStart(5)} %`;
  console.log(`allocated: ${requests === undefined ? `${(sum / 1e6).toFixed(1)} MB` : `${(sum / requests).toFixed(0)} B/req`}`);
  printTop('allocated by (self)', self, format);
  printTop('allocated under (with callees)', inclusive, format);
}

/**
 * --trace-gc-nvp lines (one per GC: `gc=s` scavenge, `gc=mc` mark-compact, `pause=`, `promoted=`,
 * `new_space_survived=` …) summed per kind and divided by the window's requests.
 */
function summariseGc(lines: readonly string[], requests: number): void {
  const kinds = new Map<string, { count: number; pauseMs: number; backgroundMs: number; promoted: number; survived: number }>();
  for (const line of lines) {
    const kind = / gc=(\w+) /.exec(line)?.[1];
    if (kind === undefined) continue;
    const field = (name: string): number => Number(new RegExp(` ${name.replace(/\./g, '\\.')}=([\\d.]+)`).exec(line)?.[1] ?? 0);
    const sum = kinds.get(kind) ?? { count: 0, pauseMs: 0, backgroundMs: 0, promoted: 0, survived: 0 };
    sum.count++;
    sum.pauseMs += field('pause');
    sum.backgroundMs += field('background.scavenge.parallel') + field('background.mark') + field('background.sweep');
    sum.promoted += field('promoted');
    sum.survived += field('new_space_survived');
    kinds.set(kind, sum);
  }
  const names: Record<string, string> = { s: 'scavenge', mc: 'mark-compact', ms: 'minor mark-sweep' };
  for (const [kind, sum] of kinds) {
    console.log(
      `GC ${names[kind] ?? kind}: ${((sum.count / requests) * 1000).toFixed(2)} per 1,000 req, pause ${((sum.pauseMs * 1000) / requests).toFixed(2)} µs/req ` +
        `(+ ${((sum.backgroundMs * 1000) / requests).toFixed(2)} on helper threads), promoted ${(sum.promoted / requests).toFixed(0)} B/req, survived ${(sum.survived / requests).toFixed(0)} B/req`,
    );
  }
}

async function main(): Promise<void> {
  const summary = option('--summary');
  const requestsOption = option('--requests');
  if (summary !== undefined) return summarise(summary, requestsOption === undefined ? undefined : Number(requestsOption));

  const outDir = resolve(option('--out') ?? '.bench-results/profiles');
  await mkdir(outDir, { recursive: true });
  const seconds = Number(option('--seconds') ?? 8);
  const body = option('--body');
  const before = new Set(readdirSync(outDir));
  const againstCommit = option('--against');
  const window = option('--window');
  const baselineFile = option('--baseline');
  if (baselineFile !== undefined) return profileBaseline(baselineFile, window, outDir, seconds);
  // `--redis`: the engine in Redis mode (one node, its own redis-server), as each node of the bench's two-node rows.
  const redis = flag('--redis') ? await startRedisServer() : undefined;
  const engine = await startEngine({
    ...(againstCommit === undefined ? {} : { engineBin: engineBuiltAt(againstCommit).bin }),
    cluster: { processes: 1, ...(redis === undefined ? {} : { redis_url: redis.url, secret: 'profile', name: 'profile', node_id: 'node-a', advertise_host: '127.0.0.1' }) },
    logLevel: 'warn',
    nodeArgs: [
      ...(window === undefined
        ? ['--cpu-prof', `--cpu-prof-dir=${outDir}`, `--cpu-prof-interval=${option('--interval-us') ?? 1000}`]
        : ['--import', resolve('bench/lib/window-profiler.mjs')]),
      ...(flag('--gc') ? ['--trace-gc-nvp'] : []),
      // `--node-args "--max-semi-space-size=32"`: more flags for the engine (children inherit them).
      ...(option('--node-args')?.split(' ').filter((a) => a !== '') ?? []),
    ],
    ...(window === undefined
      ? {}
      : { env: { WINDOW_PROFILE_DIR: outDir, WINDOW_PROFILE: window, WINDOW_PROFILE_INTERVAL_US: option('--interval-us') ?? '200' } }),
  });
  const child = childPids(engine.child.pid as number)[0];
  if (window !== undefined && child === undefined) throw new Error('the engine has no child to profile');
  let windowCpuNs = 0;
  /** The whole process's user and system CPU ticks (all threads, 100 per second), from /proc/<pid>/stat. */
  const ticks = (pid: number): [number, number] => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return [Number(fields[11]), Number(fields[12])];
  };
  let windowTicks: [number, number] = [0, 0];
  /** With --gc: the engine's output lines at the window's start and end. */
  const gcLines: number[] = [];
  const onMeasure =
    window === undefined
      ? undefined
      : {
          start: (): void => {
            process.kill(child as number, 'SIGUSR2');
            windowCpuNs = cpuNs(child as number);
            windowTicks = ticks(child as number);
            gcLines.push(engine.stdout.lines.length);
          },
          end: (): void => {
            windowCpuNs = cpuNs(child as number) - windowCpuNs;
            const [user, system] = ticks(child as number);
            windowTicks = [user - windowTicks[0], system - windowTicks[1]];
            gcLines.push(engine.stdout.lines.length);
            process.kill(child as number, 'SIGUSR2');
          },
        };
  const workerArgs = flag('--worker-prof') ? ['--cpu-prof', `--cpu-prof-dir=${outDir}`] : [];
  const workerFile = join('bench/workers', flag('--sdk') ? 'sdk-worker.mjs' : 'raw-worker.mjs');
  const worker = spawnManaged(process.execPath, [...workerArgs, workerFile], {
    ...process.env,
    OTEL_ENABLED: flag('--shipped') ? 'true' : 'false',
    III_URL: engine.workerUrl,
    ROUTES: 'GET /bench/hello,POST /bench/echo',
    ...(flag('--middleware') ? { MIDDLEWARE: '1' } : {}),
  });
  // The measured window's requests (the per-request figures divide by them).
  const requests = await (async (): Promise<number> => {
    try {
      await worker.stdout.waitFor((l) => l === 'registered', 20_000, 'worker registered');
      // The bench rows' own bodies (records, not one long string: their garbage and promotion differ).
      const payload = body === undefined ? undefined : jsonBody(body === '64k' ? 64 * 1024 : 1024);
      const result = await runLoad({
        url: `${engine.httpUrl}${payload === undefined ? '/bench/hello' : '/bench/echo'}`,
        connections: Number(option('--connections') ?? 64),
        durationMs: seconds * 1000,
        warmupMs: 1000,
        ...(onMeasure === undefined ? {} : { onMeasure }),
        ...(payload === undefined ? {} : { method: 'POST', body: payload, headers: { 'content-type': 'application/json' } }),
      });
      console.log(`${Math.round(result.rps)} req/s, p99 ${result.p99Ms.toFixed(2)} ms, errors ${result.errors}`);
      const requests = result.requests + result.errors;
      if (window !== undefined) {
        console.log(`child ${child}: ${(windowCpuNs / 1000 / requests).toFixed(1)} µs CPU/req over the window (profiler included), ${requests} requests; all threads: user ${((windowTicks[0] * 1e4) / requests).toFixed(1)}, system ${((windowTicks[1] * 1e4) / requests).toFixed(1)} µs/req`);
        if (flag('--gc')) {
          const windowLines = engine.stdout.lines.slice(gcLines[0], gcLines[1]);
          await writeFile(join(outDir, `gc-${child}.log`), `${windowLines.join('\n')}\n`);
          summariseGc(windowLines, requests);
        }
        await profileWritten(outDir, child as number, 'child');
      }
      return requests;
    } finally {
      await stopProcess(worker, 'SIGTERM', 3000);
      await engine.stop();
      await redis?.stop();
    }
  })();
  const written = readdirSync(outDir).filter((f) => !before.has(f) && !f.endsWith('.done'));
  for (const file of written) console.log(join(outDir, file));
  if (window !== undefined) {
    for (const file of written.filter((f) => f.endsWith('.cpuprofile') || f.endsWith('.heapprofile'))) {
      console.log(`\n== ${file} (per request)`);
      await summarise(join(outDir, file), requests);
    }
  }
}

/** Waits (at most 20 s) for the window profiler of process `pid` to have written its files. */
async function profileWritten(outDir: string, pid: number, who: string): Promise<void> {
  const done = join(outDir, `window-${pid}.done`);
  for (let waited = 0; !existsSync(done); waited += 50) {
    if (waited > 20_000) throw new Error(`no profile from ${who} ${pid}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** `--baseline FILE`: the baseline's own process profiled over the load's window (GET, as the engine's default). */
async function profileBaseline(file: string, window: string | undefined, outDir: string, seconds: number): Promise<void> {
  if (window === undefined || window === 'snapshot') throw new Error('--baseline needs --window cpu, heap or cpu,heap');
  const baseline = await startBaseline(
    file,
    { WINDOW_PROFILE_DIR: outDir, WINDOW_PROFILE: window, WINDOW_PROFILE_MAIN: '1', WINDOW_PROFILE_INTERVAL_US: option('--interval-us') ?? '200' },
    ['--import', resolve('bench/lib/window-profiler.mjs')],
  );
  const pid = baseline.pid;
  let windowCpuNs = 0;
  const requests = await (async (): Promise<number> => {
    try {
      const result = await runLoad({
        url: `${baseline.origin}/bench/hello`,
        connections: Number(option('--connections') ?? 64),
        durationMs: seconds * 1000,
        warmupMs: 1000,
        onMeasure: {
          start: () => {
            process.kill(pid, 'SIGUSR2');
            windowCpuNs = cpuNs(pid);
          },
          end: () => {
            windowCpuNs = cpuNs(pid) - windowCpuNs;
            process.kill(pid, 'SIGUSR2');
          },
        },
      });
      const requests = result.requests + result.errors;
      console.log(`${Math.round(result.rps)} req/s, p99 ${result.p99Ms.toFixed(2)} ms, errors ${result.errors}`);
      console.log(`baseline ${pid}: ${(windowCpuNs / 1000 / requests).toFixed(1)} µs CPU/req over the window (profiler included), ${requests} requests`);
      await profileWritten(outDir, pid, 'baseline');
      return requests;
    } finally {
      await baseline.stop();
    }
  })();
  for (const kind of ['cpuprofile', 'heapprofile']) {
    const file = join(outDir, `window-${pid}.${kind}`);
    if (!existsSync(file)) continue;
    console.log(`\n== ${file} (per request)`);
    await summarise(file, requests);
  }
}

await main();
