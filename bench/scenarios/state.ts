import { join } from 'node:path';
import { BASELINES_DIR, WORKERS_DIR, smoke } from '../lib/options.js';
import type { CheckGroup, ScaleRow } from '../lib/report.js';
import { int, ms } from '../lib/report.js';
import { median } from '../lib/load.js';
import { alternateRounds } from '../lib/alternate.js';
import { scriptResults, withRedisModeEngine } from '../lib/redis-pair.js';

/**
 * iii-state on Redis (docs/state.md) against baseline (8), a bare ioredis client doing the same SETs
 * and GETs, on one redis-server started here. Switchyard: one engine process in Redis mode with
 * `iii-state` on the `redis` adapter, an iii-sdk worker calling state::set then state::get through
 * the engine. Both do COUNT of each with 64 outstanding on the same 100 keys; rounds alternate; the
 * rows are the medians and their ratios (throughput: Switchyard ÷ ioredis; p50 latency: Switchyard ÷
 * ioredis). What the ratio prices is the engine hop (worker → engine → Redis → engine → worker) and
 * state's read-modify-publish script, against one bare round trip.
 */
const COUNT = smoke ? 500 : 20_000;
const ROUNDS = smoke ? 1 : 3;
type Op = 'set' | 'get';

interface Result {
  op: Op;
  perSecond: number;
  p50Ms: number;
}

const runScript = (script: string, env: NodeJS.ProcessEnv): Promise<Result[]> =>
  scriptResults<Result>(script, { ...env, COUNT: String(COUNT), IN_FLIGHT: '64' }, '{"op"', 2);

async function stateRows(): Promise<ScaleRow[]> {
  const ours: Result[] = [];
  const bare: Result[] = [];
  await withRedisModeEngine('sbench', [{ name: 'iii-state', config: { adapter: { name: 'redis' } } }], (redis, engine) =>
    alternateRounds(
      ROUNDS,
      async () => {
        bare.push(...(await runScript(join(BASELINES_DIR, '8-ioredis-state.mjs'), { REDIS_URL: redis.url })));
      },
      async () => {
        ours.push(...(await runScript(join(WORKERS_DIR, 'state-bench-worker.mjs'), { III_URL: engine.workerUrl, OTEL_ENABLED: 'false' })));
      },
    ),
  );
  const m = (list: Result[], op: Op, pick: (r: Result) => number): number => median(list.filter((r) => r.op === op).map(pick));
  const ratio = (a: number, b: number): string => (b === 0 ? 'n/a' : `${(a / b).toFixed(2)}×`);
  return (['set', 'get'] as const).flatMap((op) => [
    {
      check: `state::${op} on Redis: calls/s, ${int(COUNT)} calls, 64 outstanding (Switchyard ÷ bare ioredis)`,
      result: `${ratio(m(ours, op, (r) => r.perSecond), m(bare, op, (r) => r.perSecond))} (${int(m(ours, op, (r) => r.perSecond))}/s vs ${int(m(bare, op, (r) => r.perSecond))}/s)`,
      target: 'measured (no target)',
      pass: undefined,
    },
    {
      check: `state::${op} on Redis: latency p50 (Switchyard ÷ bare ioredis)`,
      result: `${ratio(m(ours, op, (r) => r.p50Ms), m(bare, op, (r) => r.p50Ms))} (${ms(m(ours, op, (r) => r.p50Ms))} ms vs ${ms(m(bare, op, (r) => r.p50Ms))} ms)`,
      target: 'measured (no target)',
      pass: undefined,
    },
  ]);
}

export const state: CheckGroup = { kind: 'check', name: 'state: state::set / state::get vs bare ioredis', run: () => stateRows() };
