/**
 * CPU-profiles the engine under one benchmark load (docs/performance.md, "How to profile").
 *
 *   npm run bench:profile -- [--middleware] [--body 1k|64k] [--sdk [--shipped]] [--connections N]
 *                            [--worker-prof] [--interval-us N] [--seconds N] [--out DIR] [--against COMMIT]
 *
 * Starts a one-process engine with `--cpu-prof` (primary and child write a .cpuprofile into DIR when
 * they exit), one bench worker, and runs the closed-loop load for N seconds (default 8) over N
 * connections (default 64). `--shipped` runs the iii-sdk worker as shipped (OpenTelemetry on);
 * `--worker-prof` profiles the worker process too; `--against COMMIT` profiles the engine built at
 * COMMIT instead (bench/lib/against.ts), to compare where a regression went. Prints the
 * profile files and the load's throughput; open them in Chrome DevTools or summarise them with
 * `npx tsx bench/profile.ts --summary FILE`.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { readdirSync } from 'node:fs';
import { spawnManaged, startEngine, stopProcess } from '../test/support/processes.js';
import { engineBuiltAt } from './lib/against.js';
import { runLoad } from './lib/load.js';

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

/** Self and total time per function (top 40 of each), from a .cpuprofile. */
async function summarise(file: string): Promise<void> {
  const profile = JSON.parse(await readFile(file, 'utf8')) as { nodes: ProfileNode[]; samples: number[] };
  const total = profile.samples.length;
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const nameOf = (node: ProfileNode): string => {
    const { functionName, url, lineNumber } = node.callFrame;
    const where = url === '' ? '' : ` ${url.replace(/^.*\/(node_modules|src|dist)\//, '$1/')}:${lineNumber + 1}`;
    return `${functionName === '' ? '(anonymous)' : functionName}${where}`;
  };
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  // Total time: a function's samples and its callees', counted once per stack even when recursive.
  const walk = (id: number, onStack: Set<string>): number => {
    const node = nodes.get(id) as ProfileNode;
    const name = nameOf(node);
    const own = node.hitCount ?? 0;
    self.set(name, (self.get(name) ?? 0) + own);
    const nested = onStack.has(name);
    if (!nested) onStack.add(name);
    let sum = own;
    for (const child of node.children ?? []) sum += walk(child, onStack);
    if (!nested) {
      onStack.delete(name);
      inclusive.set(name, (inclusive.get(name) ?? 0) + sum);
    }
    return sum;
  };
  walk(profile.nodes[0]?.id as number, new Set());
  const print = (title: string, byFunction: Map<string, number>): void => {
    console.log(title);
    const top = [...byFunction.entries()].sort((a, b) => b[1] - a[1]).slice(0, 40);
    for (const [name, hits] of top) console.log(`${((hits / total) * 100).toFixed(1).padStart(5)} %  ${name}`);
  };
  print('self time', self);
  print('total time (with callees)', inclusive);
}

async function main(): Promise<void> {
  const summary = option('--summary');
  if (summary !== undefined) return summarise(summary);

  const outDir = resolve(option('--out') ?? '.bench-results/profiles');
  await mkdir(outDir, { recursive: true });
  const seconds = Number(option('--seconds') ?? 8);
  const body = option('--body');
  const before = new Set(readdirSync(outDir));
  const againstCommit = option('--against');
  const engine = await startEngine({
    ...(againstCommit === undefined ? {} : { engineBin: engineBuiltAt(againstCommit).bin }),
    cluster: { processes: 1 },
    logLevel: 'warn',
    nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${outDir}`, `--cpu-prof-interval=${option('--interval-us') ?? 1000}`],
  });
  const workerArgs = flag('--worker-prof') ? ['--cpu-prof', `--cpu-prof-dir=${outDir}`] : [];
  const workerFile = join('bench/workers', flag('--sdk') ? 'sdk-worker.mjs' : 'raw-worker.mjs');
  const worker = spawnManaged(process.execPath, [...workerArgs, workerFile], {
    ...process.env,
    OTEL_ENABLED: flag('--shipped') ? 'true' : 'false',
    III_URL: engine.workerUrl,
    ROUTES: 'GET /bench/hello,POST /bench/echo',
    ...(flag('--middleware') ? { MIDDLEWARE: '1' } : {}),
  });
  try {
    await worker.stdout.waitFor((l) => l === 'registered', 20_000, 'worker registered');
    const payload = body === undefined ? undefined : JSON.stringify({ data: 'x'.repeat(body === '64k' ? 65_500 : 1000) });
    const result = await runLoad({
      url: `${engine.httpUrl}${payload === undefined ? '/bench/hello' : '/bench/echo'}`,
      connections: Number(option('--connections') ?? 64),
      durationMs: seconds * 1000,
      warmupMs: 1000,
      ...(payload === undefined ? {} : { method: 'POST', body: payload, headers: { 'content-type': 'application/json' } }),
    });
    console.log(`${Math.round(result.rps)} req/s, p99 ${result.p99Ms.toFixed(2)} ms, errors ${result.errors}`);
  } finally {
    await stopProcess(worker, 'SIGTERM', 3000);
    await engine.stop();
  }
  for (const file of readdirSync(outDir).filter((f) => !before.has(f))) console.log(join(outDir, file));
}

await main();
