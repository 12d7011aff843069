/**
 * What a streamed upload costs one engine process under given V8 flags for its child: the bench's
 * iii-sdk `http()` upload route (bench/workers/stream-worker.mjs), uploads sent back to back, and
 * per upload the rate, the engine child's CPU per MiB (user and system, from /proc) and the worker's.
 * With `--trace-gc` among the child's flags it also counts the child's scavenges and full
 * (mark-compact) collections per upload, from the engine's output. The first two uploads warm up and
 * are not printed.
 *
 *   npx tsx bench/upload-heap.ts [--uploads N] [--mib N] -- <child node flags…>
 *   npx tsx bench/upload-heap.ts -- --heap-growing-percent=50 --min-semi-space-size=16 --max-semi-space-size=16 --trace-gc
 *
 * The flags after `--` replace `cluster.child_node_args` (the engine's default is not added to them).
 * Used for issue 26's point 5 (docs/performance.md, "what the garbage collector costs an upload").
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { spawnManaged, startEngine, stopProcess } from '../test/support/processes.js';
import { WORKERS_DIR } from './lib/options.js';
import { readyz, until } from './lib/subjects.js';

const argv = process.argv.slice(2);
const split = argv.indexOf('--');
const own = split === -1 ? argv : argv.slice(0, split);
const childArgs = split === -1 ? [] : argv.slice(split + 1);
const option = (name: string, fallback: number): number => {
  const at = own.indexOf(name);
  return at === -1 ? fallback : Number(own[at + 1]);
};
const uploads = option('--uploads', 7);
const mib = option('--mib', 256);
const WARM_UP = 2;
const CHUNK = Buffer.alloc(64 * 1024, 7);

/** utime and stime of a process, in clock ticks (10 ms each). */
function ticks(pid: number): { user: number; system: number } {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return { user: Number(fields[11]), system: Number(fields[12]) };
}

async function upload(url: string, bytes: number): Promise<void> {
  const body = Readable.from(
    (function* () {
      for (let sent = 0; sent < bytes; sent += CHUNK.length) yield CHUNK;
    })(),
  );
  const res = await request(url, { method: 'POST', body, headers: { 'content-type': 'application/octet-stream' }, headersTimeout: 60_000, bodyTimeout: 60_000 });
  const answer = (await res.body.json()) as { received: number };
  if (answer.received !== bytes) throw new Error(`upload delivered ${answer.received} of ${bytes} bytes`);
}

const engine = await startEngine({ cluster: { processes: 1, child_node_args: childArgs }, logLevel: 'warn', api: { concurrency_request_limit: 4096 } });
const worker = spawnManaged(process.execPath, [join(WORKERS_DIR, 'stream-worker.mjs')], { ...process.env, OTEL_ENABLED: 'false', III_URL: engine.workerUrl });
try {
  await worker.stdout.waitFor((l) => l === 'registered', 20_000, 'stream worker registered');
  await until('/bench/download', 10_000, async () => {
    const res = await request(`${engine.httpUrl}/bench/download?bytes=1`);
    await res.body.dump();
    return res.statusCode === 200 ? true : undefined;
  });
  const child = (await readyz(engine)).children[0]?.pid as number;
  const workerPid = worker.child.pid as number;
  const bytes = mib * 1024 * 1024;
  const perMib = (ticksSpent: number): string => ((ticksSpent * 10) / mib).toFixed(2);
  console.log(`child flags: ${childArgs.join(' ') || '(none)'}; ${uploads} uploads of ${mib} MiB, the first ${WARM_UP} not printed`);
  for (let i = 0; i < uploads; i++) {
    const lines = engine.stdout.lines.length;
    const [c0, w0, t0] = [ticks(child), ticks(workerPid), performance.now()];
    await upload(`${engine.httpUrl}/bench/upload`, bytes);
    const [c1, w1, seconds] = [ticks(child), ticks(workerPid), (performance.now() - t0) / 1000];
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
      `${(mib / seconds).toFixed(0)} MB/s; engine ${perMib(user + system)} ms/MiB (user ${perMib(user)}, system ${perMib(system)}); worker ${perMib(workerSpent)} ms/MiB` +
        (childArgs.includes('--trace-gc') ? `; ${scavenges} scavenges, ${fullGcs} mark-compacts` : ''),
    );
  }
} finally {
  await stopProcess(worker, 'SIGTERM', 3000);
  await engine.stop();
}
