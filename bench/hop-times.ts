/**
 * Where one request's time goes, hop by hop, one at a time (docs/performance.md, "One at a time: what
 * the row measures"):
 *
 *   npx tsx bench/hop-times.ts [--one-cpu] [--rounds N] [--seconds N]
 *
 * Starts a one-process engine with the raw worker and baseline (2) with the same worker, each process
 * preloaded with bench/lib/hop-tap.mjs, runs one connection's closed loop on each in alternating rounds
 * (default 4 of 3 s after 1 s of warm-up) and prints, per round, the median of each step of a request:
 * the server's read of the HTTP request until Node's 'request' event (the engine's framing guard; (2)
 * lets Node read natively, so it has no such step), 'request' until the worker frame is written, the
 * frame's write until the worker reads it, the worker's own step, its write until the server reads the
 * result, and that read until the response is written. `--one-cpu` runs each subject with this process
 * (the load generator) on one CPU, as the bench's one-at-a-time row does.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_CHILD_NODE_ARGS } from '../src/config/schema.js';
import { onCpu } from './lib/affinity.js';
import { median, runLoad } from './lib/load.js';
import { kernelAndIdle } from './lib/machine.js';
import { baselinePids, engineSetupPids } from './lib/members.js';
import { startBaseline, startSwitchyard } from './lib/subjects.js';

const args = process.argv.slice(2);
const option = (name: string, fallback: number): number => {
  const at = args.indexOf(name);
  return at === -1 ? fallback : Number(args[at + 1]);
};
const oneCpu = args.includes('--one-cpu');
const rounds = option('--rounds', 4);
const seconds = option('--seconds', 3);

const STEPS = ['guard', 'request → frame', 'frame → worker', 'worker', 'worker → result', 'result → response'] as const;
type Step = (typeof STEPS)[number];

/** Each request's steps from the notes of the server (`server`) and of its worker (`worker`). */
export function steps(server: { times: number[]; kinds: number[] }, worker: { times: number[]; kinds: number[] }): Record<Step, number[]> {
  const events = [
    ...server.times.map((t, i) => ({ t, kind: server.kinds[i] as number, worker: false })),
    ...worker.times.map((t, i) => ({ t, kind: worker.kinds[i] as number, worker: true })),
  ].sort((a, b) => a.t - b.t);
  const out = Object.fromEntries(STEPS.map((s) => [s, [] as number[]])) as Record<Step, number[]>;
  // The moments of the request being followed: read, request, frame, worker read, worker write, result.
  let at: Partial<Record<'read' | 'request' | 'frame' | 'workerRead' | 'workerWrite' | 'result', number>> = {};
  for (const { t, kind, worker: inWorker } of events) {
    if (!inWorker && kind === 5) at = { read: t };
    else if (!inWorker && kind === 1) at = { ...(at.read === undefined || at.request !== undefined ? {} : { read: at.read }), request: t };
    else if (!inWorker && kind === 2 && at.request !== undefined && at.frame === undefined) at.frame = t;
    else if (inWorker && kind === 3 && at.frame !== undefined && at.workerRead === undefined) at.workerRead = t;
    else if (inWorker && kind === 2 && at.workerRead !== undefined && at.workerWrite === undefined) at.workerWrite = t;
    else if (!inWorker && kind === 3 && at.workerWrite !== undefined && at.result === undefined) at.result = t;
    else if (!inWorker && kind === 4 && at.result !== undefined && at.request !== undefined && at.frame !== undefined && at.workerRead !== undefined && at.workerWrite !== undefined) {
      if (at.read !== undefined) out.guard.push(at.request - at.read);
      out['request → frame'].push(at.frame - at.request);
      out['frame → worker'].push(at.workerRead - at.frame);
      out.worker.push(at.workerWrite - at.workerRead);
      out['worker → result'].push(at.result - at.workerWrite);
      out['result → response'].push(t - at.result);
      at = {};
    }
  }
  return out;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'hop-times-'));
  const preload = join(import.meta.dirname, 'lib', 'hop-tap.mjs');
  process.env.HOP_TAP_DIR = dir;
  // The engine's children get the preload through their flags.
  process.env.BENCH_CHILD_NODE_ARGS = JSON.stringify([...DEFAULT_CHILD_NODE_ARGS, `--import=${preload}`]);
  const tap = { NODE_OPTIONS: `--import=${preload}` };
  const engine = await startSwitchyard(1, [{ script: 'raw-worker.mjs', env: tap }]);
  const baseline = await startBaseline('2-ws-worker.mjs', tap);
  try {
    const subjects = [
      { name: 'Switchyard', url: engine.engine.httpUrl, server: engine.children[0]?.pid as number, worker: engine.workers[0]?.child.pid as number, all: engineSetupPids(engine) },
      { name: '(2)', url: baseline.origin, server: baseline.pid, worker: baselinePids(baseline).find((pid) => pid !== baseline.pid) as number, all: baselinePids(baseline) },
    ];
    console.log(`one connection, ${oneCpu ? 'one CPU' : 'all CPUs'}; median µs per step; ${kernelAndIdle()}`);
    console.log(`| round | subject | p50 µs | ${STEPS.join(' | ')} | requests followed |`);
    console.log(`| ---: | --- | ---: | ${STEPS.map(() => '---:').join(' | ')} | ---: |`);
    for (let round = 1; round <= rounds; round++) {
      for (const s of round % 2 === 1 ? subjects : [...subjects].reverse()) {
        const mark = (): void => [s.server, s.worker].forEach((pid) => process.kill(pid, 'SIGUSR1'));
        const load = () => runLoad({ url: `${s.url}/bench/hello`, connections: 1, durationMs: seconds * 1000, warmupMs: 1000, onMeasure: { start: mark, end: mark } });
        const result = oneCpu ? await onCpu([process.pid, ...s.all], 0, load) : await load();
        await new Promise((resolve) => setTimeout(resolve, 300));
        const read = async (pid: number): Promise<{ times: number[]; kinds: number[] }> => JSON.parse(await readFile(join(dir, `hop-${pid}.json`), 'utf8'));
        const found = steps(await read(s.server), await read(s.worker));
        const cells = STEPS.map((step) => (found[step].length === 0 ? '—' : median(found[step]).toFixed(1)));
        console.log(`| ${round} | ${s.name} | ${(result.p50Ms * 1000).toFixed(0)} | ${cells.join(' | ')} | ${found['request → frame'].length} |`);
      }
    }
  } finally {
    await engine.stop();
    await baseline.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1]?.endsWith('hop-times.ts')) await main();
