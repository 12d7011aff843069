/**
 * What a streamed upload (or, with `--download`, a streamed download) costs one engine process under
 * given V8 flags for its child: the bench's iii-sdk `http()` routes (bench/workers/stream-worker.mjs),
 * transfers back to back, and per transfer the rate, the child's RSS after it, the engine child's CPU
 * per MiB (user and system, from /proc) and the worker's; at the end the child's RSS over 10 s idle.
 * With `--trace-gc` among the child's flags it also counts the child's scavenges and full
 * (mark-compact) collections per transfer, from the engine's output. The first two transfers warm up
 * and are not printed. `--stream-heap N` sets cluster.stream_heap_growing_percent (0: off).
 *
 *   npx tsx bench/upload-heap.ts [--uploads N] [--mib N] [--download] [--stream-heap N] -- <child node flags…>
 *   npx tsx bench/upload-heap.ts -- --heap-growing-percent=50 --min-semi-space-size=16 --max-semi-space-size=16 --trace-gc
 *
 * The flags after `--` replace `cluster.child_node_args` (the engine's default is not added to them);
 * without `--` the children start with the engine's default.
 * Used for issue 26's point 5 (docs/performance.md, "what the garbage collector costs an upload",
 * "the growing factor raised while a body streams").
 */
import { cpuTicks, rssMb } from '../test/support/proc.js';
import { download, startEngineWithStreamWorker, upload } from './scenarios/streaming.js';

const argv = process.argv.slice(2);
const split = argv.indexOf('--');
const own = split === -1 ? argv : argv.slice(0, split);
const childArgs = split === -1 ? [] : argv.slice(split + 1);
const option = (name: string, fallback: number): number => {
  const at = own.indexOf(name);
  return at === -1 ? fallback : Number(own[at + 1]);
};
const uploads = option('--uploads', 7);
// `--download`: the same, for downloads of the route's `?bytes=` (the worker writes, the engine relays).
const downloads = own.includes('--download');
// `--stream-heap N`: cluster.stream_heap_growing_percent (0: the children keep their own factor throughout).
const streamHeap = own.includes('--stream-heap') ? option('--stream-heap', 200) : undefined;
const mib = option('--mib', 256);
const WARM_UP = 2;

// Without `--` the children keep the engine's default flags.
const subject = await startEngineWithStreamWorker(split === -1 ? undefined : childArgs, streamHeap);
const { engine, worker, child } = subject;
try {
  const workerPid = worker.child.pid as number;
  const perMib = (ticksSpent: number): string => ((ticksSpent * 10) / mib).toFixed(2);
  console.log(`child flags: ${split === -1 ? "the engine's default" : childArgs.join(' ') || '(none)'}; stream_heap_growing_percent ${streamHeap ?? 'default'}; ${uploads} ${downloads ? 'downloads' : 'uploads'} of ${mib} MiB, the first ${WARM_UP} not printed`);
  for (let i = 0; i < uploads; i++) {
    const lines = engine.stdout.lines.length;
    const [c0, w0] = [cpuTicks(child), cpuTicks(workerPid)];
    const bytes = mib * 1024 * 1024;
    const rate = downloads ? await download(`${engine.httpUrl}/bench/download?bytes=${bytes}`, bytes) : await upload(`${engine.httpUrl}/bench/upload`, bytes);
    const [c1, w1] = [cpuTicks(child), cpuTicks(workerPid)];
    if (i < WARM_UP) continue;
    // The engine's output reaches the harness a little after the upload's answer.
    await new Promise((r) => setTimeout(r, 200));
    const gc = engine.stdout.lines.slice(lines);
    const scavenges = gc.filter((l) => l.includes(': Scavenge ')).length;
    const fullGcs = gc.filter((l) => l.includes(': Mark-Compact ')).length;
    const user = c1.user - c0.user;
    const system = c1.system - c0.system;
    const workerSpent = w1.user + w1.system - (w0.user + w0.system);
    console.log(
      `${rate.toFixed(0)} MB/s; child RSS ${rssMb(child).toFixed(0)} MB; engine ${perMib(user + system)} ms/MiB (user ${perMib(user)}, system ${perMib(system)}); worker ${perMib(workerSpent)} ms/MiB` +
        (childArgs.includes('--trace-gc') ? `; ${scavenges} scavenges, ${fullGcs} mark-compacts` : ''),
    );
  }
  // What the child holds once the transfers are over: at once, and after V8 had time to shrink it idle.
  const idle = [rssMb(child)];
  for (let i = 0; i < 2; i++) {
    await new Promise((r) => setTimeout(r, 5000));
    idle.push(rssMb(child));
  }
  console.log(`child RSS after the last transfer: ${idle.map((mb) => mb.toFixed(0)).join(' → ')} MB (at once, 5 s, 10 s idle)`);
} finally {
  await subject.stop();
}
