import { join } from 'node:path';
import { BASELINES_DIR, WORKERS_DIR, smoke } from '../lib/options.js';
import type { CheckGroup, ScaleRow } from '../lib/report.js';
import { int, ms } from '../lib/report.js';
import { median } from '../lib/load.js';
import { alternateRounds } from '../lib/alternate.js';
import { scriptResults, withRedisModeEngine } from '../lib/redis-pair.js';

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

const runScript = async (script: string, env: NodeJS.ProcessEnv): Promise<Result> =>
  (await scriptResults<Result>(script, { ...env, COUNT: String(COUNT), IN_FLIGHT: '64', CONCURRENCY: String(CONCURRENCY) }, '{"count"', 1))[0] as Result;

async function queueRows(): Promise<ScaleRow[]> {
  const ours: Result[] = [];
  const bare: Result[] = [];
  const queue = { name: 'iii-queue', config: { queue_configs: { bench: { concurrency: CONCURRENCY, max_retries: 3 } } } };
  await withRedisModeEngine('qbench', [queue], (redis, engine) =>
    alternateRounds(
      ROUNDS,
      async () => {
        bare.push(await runScript(join(BASELINES_DIR, '7-bullmq-pair.mjs'), { REDIS_URL: redis.url }));
      },
      async () => {
        ours.push(await runScript(join(WORKERS_DIR, 'queue-bench-worker.mjs'), { III_URL: engine.workerUrl, OTEL_ENABLED: 'false' }));
      },
    ),
  );
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
