/**
 * Issue 4's measurements (docs/cluster.md#measurements):
 * 1. registration → servable on every process: p50/p99, embedded (processes: 2) and Redis (two nodes
 *    of two processes), from each child's "table rebuilt" debug line;
 * 2. throughput of a forwarded request against a local one, in the same run: two Redis-mode nodes of
 *    one process each, a raw worker on node A; load on A is local, load on B is forwarded (TCP).
 * Run: npx tsx bench/cluster.ts [--smoke]
 */
import { join } from 'node:path';
import { RawWorker } from '../test/support/raw-worker.js';
import type { EngineHandle } from '../test/support/processes.js';
import { ROOT, spawnManaged, startEngine, stopProcess } from '../test/support/processes.js';
import { waitForStatus } from '../test/support/http.js';
import { startRedisServer } from '../test/support/redis.js';
import { median, runLoad } from './lib/load.js';

const smoke = process.argv.includes('--smoke');
const REGISTRATIONS = smoke ? 10 : 200;

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

/** Time from sending a trigger to every child of every engine having it in its table. */
async function registrationLatency(engines: EngineHandle[], childPids: number[], label: string): Promise<string> {
  const worker = await RawWorker.connect(engines[0]!.workerUrl);
  worker.send({ type: 'registerfunction', id: 'lat::fn' });
  await worker.sync();
  const latencies: number[] = [];
  for (let k = 1; k <= REGISTRATIONS; k++) {
    const sentAt = Date.now();
    worker.send({ type: 'registertrigger', id: `lat-${k}`, trigger_type: 'http', function_id: 'lat::fn', config: { api_path: `/lat/${k}`, http_method: 'GET' } });
    const seen = await Promise.all(
      childPids.map((pid) => {
        const engine = engines.find((e) => e.stdout.lines.some((l) => l.includes(`"pid":${pid},`)))!;
        return engine.stdout
          .waitFor((l) => l.includes(`"pid":${pid},`) && l.includes('"table rebuilt"') && Number(/"routes":(\d+)/.exec(l)?.[1]) >= k, 10_000, `route ${k} on ${pid}`)
          .then((l) => Number(/"time":(\d+)/.exec(l)?.[1]));
      }),
    );
    latencies.push(Math.max(...seen) - sentAt);
  }
  await worker.close();
  return `| ${label} | ${childPids.length} | ${REGISTRATIONS} | ${percentile(latencies, 50)} | ${percentile(latencies, 99)} |`;
}

async function childPidsOf(engine: EngineHandle, count: number): Promise<number[]> {
  const pids = new Set<number>();
  await engine.stdout.waitFor(
    (l) => {
      const m = /"pid":(\d+),.*"role":"child"/.exec(l);
      if (m) pids.add(Number(m[1]));
      return pids.size >= count;
    },
    10_000,
    'child pids',
  );
  return [...pids];
}

async function main(): Promise<void> {
  const rows: string[] = [];
  // 1a. embedded
  const embedded = await startEngine({ cluster: { processes: 2 }, logLevel: 'debug' });
  rows.push(await registrationLatency([embedded], await childPidsOf(embedded, 2), 'embedded, processes: 2'));
  await embedded.stop();

  // 1b + 2. Redis
  const redis = await startRedisServer();
  const cluster = { redis_url: redis.url, secret: 'bench', name: 'bench', advertise_host: '127.0.0.1', heartbeat_ms: 500, lease_ms: 3000 };
  const a2 = await startEngine({ cluster: { ...cluster, processes: 2, node_id: 'a' }, logLevel: 'debug' });
  const b2 = await startEngine({ cluster: { ...cluster, processes: 2, node_id: 'b' }, logLevel: 'debug' });
  const pids = [...(await childPidsOf(a2, 2)), ...(await childPidsOf(b2, 2))];
  rows.push(await registrationLatency([a2, b2], pids, 'Redis, 2 nodes x 2 processes'));
  await Promise.all([a2.stop(), b2.stop()]);

  const a = await startEngine({ cluster: { ...cluster, processes: 1, node_id: 'a1', name: 'bench2' }, logLevel: 'warn' });
  const b = await startEngine({ cluster: { ...cluster, processes: 1, node_id: 'b1', name: 'bench2' }, logLevel: 'warn' });
  const worker = spawnManaged(process.execPath, [join(ROOT, 'bench', 'workers', 'raw-worker.mjs')], { ...process.env, III_URL: a.workerUrl });
  await worker.stdout.waitFor((l) => l === 'registered');
  await waitForStatus(`${b.httpUrl}/bench/hello`, (s) => s === 200);
  const runs = smoke ? 1 : 3;
  const load = { connections: 32, durationMs: smoke ? 1000 : 5000, warmupMs: smoke ? 300 : 1000 };
  const local: number[] = [];
  const forwarded: number[] = [];
  const p99 = { local: [] as number[], forwarded: [] as number[] };
  for (let i = 0; i < runs; i++) {
    const l = await runLoad({ url: `${a.httpUrl}/bench/hello`, ...load });
    const f = await runLoad({ url: `${b.httpUrl}/bench/hello`, ...load });
    local.push(l.rps);
    forwarded.push(f.rps);
    p99.local.push(l.p99Ms);
    p99.forwarded.push(f.p99Ms);
    if (l.errors + f.errors > 0) console.error(`errors: local ${l.errors}, forwarded ${f.errors}`);
  }
  await stopProcess(worker);
  await Promise.all([a.stop(), b.stop()]);
  await redis.stop();

  console.log('\n### Registration → servable on every process (ms)\n');
  console.log('| setup | processes | registrations | p50 | p99 |\n|---|---|---|---|---|');
  for (const row of rows) console.log(row);
  console.log('\n### Forwarded vs local (Redis mode, 2 nodes, raw ws worker on A, 32 connections)\n');
  console.log('| path | req/s (median) | p99 ms (median) | ratio |\n|---|---|---|---|');
  console.log(`| local (load on A) | ${median(local).toFixed(0)} | ${median(p99.local).toFixed(2)} | 1.00 |`);
  console.log(`| forwarded over TCP (load on B) | ${median(forwarded).toFixed(0)} | ${median(p99.forwarded).toFixed(2)} | ${(median(forwarded) / median(local)).toFixed(2)} |`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
