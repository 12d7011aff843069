import { join } from 'node:path';
import { BASELINES_DIR, WORKERS_DIR, smoke } from '../lib/options.js';
import type { CheckGroup, ScaleRow } from '../lib/report.js';
import { int, ms } from '../lib/report.js';
import { spawnManaged, startEngine } from '../../test/support/processes.js';
import { startRedisServer } from '../../test/support/redis.js';
import { median } from '../lib/load.js';
import { alternateRounds } from '../lib/alternate.js';

/**
 * The built-in queue (docs/queue.md) against baseline (7), a bare BullMQ producer/consumer pair, on
 * one redis-server started here. Switchyard: one engine process in Redis mode (queue `bench`,
 * standard, concurrency 16 — BullMQ's worker gets the same), an iii-sdk worker enqueueing with
 * TriggerAction.Enqueue and serving the function. Both enqueue COUNT messages with 64 outstanding;
 * rounds alternate; the rows are the medians and their ratios (throughput: Switchyard ÷ BullMQ;
 * latency, enqueue start to run start: Switchyard ÷ BullMQ).
 */
const COUNT = smoke ? 500 : 5_000;
const ROUNDS = smoke ? 1 : 3;
const CONCURRENCY = 16;

interface Result {
  count: number;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
}

async function runScript(script: string, env: NodeJS.ProcessEnv): Promise<Result> {
  const p = spawnManaged(process.execPath, [script], { ...process.env, ...env, COUNT: String(COUNT), IN_FLIGHT: '64', CONCURRENCY: String(CONCURRENCY) });
  const timer = setTimeout(() => p.child.kill('SIGKILL'), 300_000);
  const exit = await p.exited;
  clearTimeout(timer);
  const line = p.stdout.lines.find((l) => l.startsWith('{"count"'));
  if (exit.code !== 0 || line === undefined) throw new Error(`${script} failed (${JSON.stringify(exit)}): ${p.stderr.lines.slice(-5).join('\n')}`);
  return JSON.parse(line) as Result;
}

async function queueRows(): Promise<ScaleRow[]> {
  const redis = await startRedisServer();
  const engine = await startEngine({
    logLevel: 'warn',
    cluster: { processes: 1, redis_url: redis.url, secret: 'bench-secret', name: 'qbench', advertise_host: '127.0.0.1' },
    modules: [{ name: 'iii-queue', config: { queue_configs: { bench: { concurrency: CONCURRENCY, max_retries: 3 } } } }],
  });
  const ours: Result[] = [];
  const bare: Result[] = [];
  try {
    await alternateRounds(
      ROUNDS,
      async () => {
        bare.push(await runScript(join(BASELINES_DIR, '7-bullmq-pair.mjs'), { REDIS_URL: redis.url }));
      },
      async () => {
        ours.push(await runScript(join(WORKERS_DIR, 'queue-bench-worker.mjs'), { III_URL: engine.workerUrl, OTEL_ENABLED: 'false' }));
      },
    );
  } finally {
    await engine.stop();
    await redis.stop();
  }
  const m = (list: Result[], pick: (r: Result) => number): number => median(list.map(pick));
  const ratio = (a: number, b: number): string => (b === 0 ? 'n/a' : `${(a / b).toFixed(2)}×`);
  return [
    {
      check: `queue: enqueue-to-run throughput, ${int(COUNT)} messages (Switchyard ÷ bare BullMQ)`,
      result: `${ratio(m(ours, (r) => r.perSecond), m(bare, (r) => r.perSecond))} (${int(m(ours, (r) => r.perSecond))}/s vs ${int(m(bare, (r) => r.perSecond))}/s)`,
      target: 'measured (no target)',
      pass: undefined,
    },
    {
      check: 'queue: enqueue-to-run latency p50 (Switchyard ÷ bare BullMQ)',
      result: `${ratio(m(ours, (r) => r.p50Ms), m(bare, (r) => r.p50Ms))} (${ms(m(ours, (r) => r.p50Ms))} ms vs ${ms(m(bare, (r) => r.p50Ms))} ms)`,
      target: 'measured (no target)',
      pass: undefined,
    },
    {
      check: 'queue: enqueue-to-run latency p99 (Switchyard ÷ bare BullMQ)',
      result: `${ratio(m(ours, (r) => r.p99Ms), m(bare, (r) => r.p99Ms))} (${ms(m(ours, (r) => r.p99Ms))} ms vs ${ms(m(bare, (r) => r.p99Ms))} ms)`,
      target: 'measured (no target)',
      pass: undefined,
    },
  ];
}

export const queue: CheckGroup = { kind: 'check', name: 'queue: enqueue-to-run vs bare BullMQ', run: () => queueRows() };
