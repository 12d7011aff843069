import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { http } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { startEngine, startWorker } from '../support/processes.js';
import type { RedisServer } from '../support/redis.js';
import { startRedisServer } from '../support/redis.js';

/**
 * The queue under faults: two Redis-mode nodes; producers enqueue JOBS jobs (standard queue `work`
 * and FIFO queue `ordered`, 1% poison jobs that always fail) while both consumer workers are killed
 * (SIGKILL) and restarted, one after the other, and then node B is killed (SIGKILL, primary and
 * child) and restarted. Then: every
 * acknowledged job ran to success or is in the dead-letter store, poison jobs are all dead-lettered,
 * no FIFO group ever ran out of order. The counts are printed.
 *
 * QUEUE_CHAOS_JOBS sets the size: 500 in the regular suite; `npm run queue:chaos` runs 10,000.
 */
const JOBS = Number(process.env.QUEUE_CHAOS_JOBS ?? 500);
const TIMEOUT_MS = Math.max(240_000, JOBS * 60);

const QUEUES = {
  queue_configs: {
    work: { concurrency: 16, max_retries: 8, backoff_ms: 50 },
    ordered: { type: 'fifo', message_group_field: 'group', concurrency: 8, max_retries: 8, backoff_ms: 50 },
  },
};

describe(`queue chaos: ${JOBS} jobs across two Redis nodes with consumers and a node killed`, () => {
  let redis: RedisServer;
  let nodeA: EngineHandle;
  let nodeB: EngineHandle | undefined;
  const workers: WorkerHandle[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'sy-queue-chaos-'));
  const runsFile = join(dir, 'runs');
  const acksFile = join(dir, 'acks');
  writeFileSync(runsFile, '');
  writeFileSync(acksFile, '');

  afterAll(async () => {
    for (const w of workers) await w.stop('SIGKILL').catch(() => undefined);
    await nodeB?.killAll().catch(() => undefined);
    await nodeA?.stop().catch(() => undefined);
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it(
    'every acknowledged job succeeds or is dead-lettered, poison jobs are dead-lettered, FIFO groups stay in order',
    async () => {
      redis = await startRedisServer();
      const cluster = (nodeId: string) => ({
        processes: 1,
        redis_url: redis.url,
        secret: 'chaos-secret',
        name: 'qchaos',
        node_id: nodeId,
        advertise_host: '127.0.0.1',
        heartbeat_ms: 200,
        lease_ms: 1500,
      });
      const engine = (nodeId: string): Promise<EngineHandle> => startEngine({ logLevel: 'warn', cluster: cluster(nodeId), modules: [{ name: 'iii-queue', config: QUEUES }] });
      nodeA = await engine('node-a');
      nodeB = await engine('node-b');
      const consumer = (node: EngineHandle): WorkerHandle => {
        const w = startWorker('queue-chaos-worker', node.workerUrl, { MODE: 'consume', RUNS_FILE: runsFile });
        workers.push(w);
        return w;
      };
      let consumerA = consumer(nodeA);
      let consumerB = consumer(nodeB);
      const producers = [0, 1].map((k) => {
        const w = startWorker('queue-chaos-worker', nodeA.workerUrl, {
          MODE: 'produce',
          COUNT: String(JOBS / 2),
          OFFSET: String(k * 1_000_000),
          GROUPS: '10',
          ACKS_FILE: acksFile,
        });
        workers.push(w);
        return w;
      });
      const produced = Promise.all(producers.map((p) => p.exited));
      const lines = (file: string): string[] => readFileSync(file, 'utf8').split('\n').filter((l) => l !== '');
      const started = Date.now();

      // Chaos while jobs are outstanding: each consumer is killed (SIGKILL) and restarted, then node B
      // (primary and child, with its consumer) is killed and restarted. Each fault waits for progress,
      // so it hits a run in full swing, and records how far the run was.
      const faults: { fault: string; runs: number; acknowledged: number }[] = [];
      const at = async (share: number, fault: string, act: () => Promise<void>): Promise<void> => {
        await waitUntil(() => lines(runsFile).length >= JOBS * share, TIMEOUT_MS, `${share * 100}% of the jobs run`);
        faults.push({ fault, runs: lines(runsFile).length, acknowledged: lines(acksFile).length });
        await act();
      };
      await at(0.15, 'consumer A killed', async () => {
        await consumerA.stop('SIGKILL');
        consumerA = consumer(nodeA);
      });
      await at(0.3, 'consumer B killed', async () => {
        await consumerB.stop('SIGKILL');
        consumerB = consumer(nodeB as EngineHandle);
      });
      await at(0.45, 'node B killed (primary, child and its consumer)', async () => {
        await (nodeB as EngineHandle).killAll();
        await consumerB.stop('SIGKILL');
        await new Promise((r) => setTimeout(r, 1_000));
        nodeB = await engine('node-b');
        consumerB = consumer(nodeB);
      });
      await produced;
      const acked = new Set(lines(acksFile));
      const producedMs = Date.now() - started;

      // Drain: every acknowledged job ran or is dead.
      const metric = async (name: string, queue: string): Promise<number> => {
        const text = (await http(`${nodeA.adminUrl}/metrics`)).text;
        const match = new RegExp(`^${name}\\{queue="${queue}"\\} (\\d+)`, 'm').exec(text);
        return Number(match?.[1] ?? NaN);
      };
      await waitUntil(async () => (await metric('switchyard_queue_depth', 'work')) === 0 && (await metric('switchyard_queue_depth', 'ordered')) === 0, TIMEOUT_MS, 'queues drained');

      const succeeded = new Set<string>();
      const lastSeq = new Map<string, number>();
      let outOfOrder = 0;
      let duplicates = 0;
      for (const line of lines(runsFile)) {
        const [jobId = '', group = '-', seqText = '-1'] = line.split(' ');
        if (succeeded.has(jobId)) duplicates++;
        succeeded.add(jobId);
        if (group === '-') continue;
        const seq = Number(seqText);
        if (seq < (lastSeq.get(group) ?? -1)) outOfOrder++;
        lastSeq.set(group, Math.max(seq, lastSeq.get(group) ?? -1));
      }
      const deadOf = async (queue: string): Promise<string[]> => (await http(`${nodeA.httpUrl}/chaos/dead/${queue}`)).json<string[]>();
      const dead = new Set([...(await deadOf('work')), ...(await deadOf('ordered'))]);
      const poison = [...acked].filter((id) => id.startsWith('s') && Number(id.slice(1)) % 100 === 7);
      const lost = [...acked].filter((id) => !succeeded.has(id) && !dead.has(id));
      const deadNotPoison = [...dead].filter((id) => !poison.includes(id));
      const counts = {
        jobs: JOBS,
        acknowledged: acked.size,
        succeeded: succeeded.size,
        duplicateRuns: duplicates,
        poison: poison.length,
        deadLettered: dead.size,
        deadLettersNotPoison: deadNotPoison.length,
        lost: lost.length,
        retried: (await metric('switchyard_queue_retried', 'work')) + (await metric('switchyard_queue_retried', 'ordered')),
        fifoGroups: lastSeq.size,
        fifoViolations: outOfOrder,
        producedMs,
        totalMs: Date.now() - started,
        faults,
      };
      console.log(`queue chaos counts: ${JSON.stringify(counts, null, 2)}`);

      expect(acked.size).toBe(JOBS);
      expect(outOfOrder).toBe(0);
      expect(poison.every((id) => !succeeded.has(id))).toBe(true);
      expect(poison.every((id) => dead.has(id))).toBe(true);
      // None lost: every acknowledged job ran to success or is a dead letter (chaos may exhaust a job's attempts).
      expect(lost).toEqual([]);
      // Every fault hit while jobs were still to run.
      expect(faults.map((f) => f.fault.split(' ').slice(0, 2).join(' '))).toEqual(['consumer A', 'consumer B', 'node B']);
      for (const f of faults) expect(f.runs).toBeLessThan(JOBS);
    },
    TIMEOUT_MS + 120_000,
  );
});
