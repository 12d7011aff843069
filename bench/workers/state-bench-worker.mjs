// The Switchyard side of the state row: one iii-sdk worker that calls state::set then state::get
// COUNT times each (IN_FLIGHT outstanding) through the engine, on 100 keys of one scope.
// Prints the same JSON line as baseline (8): {op, count, seconds, perSecond, p50Ms, p99Ms} per op.
import { registerWorker } from 'iii-sdk';
import { benchValue as value, measureOps } from '../baselines/measure-ops.mjs';

const count = Number(process.env.COUNT);
const inFlight = Number(process.env.IN_FLIGHT ?? 64);
const iii = registerWorker(process.env.III_URL, { workerName: 'state-bench' });

const measure = (op, call) => measureOps(op, count, inFlight, call);

// One warm-up call: the connection is registered and the engine's state module answers.
await iii.trigger({ function_id: 'state::set', payload: { scope: 'bench', key: 'warm', value: value(0) } });
await measure('set', (i) => iii.trigger({ function_id: 'state::set', payload: { scope: 'bench', key: `k${i % 100}`, value: value(i) } }));
await measure('get', (i) => iii.trigger({ function_id: 'state::get', payload: { scope: 'bench', key: `k${i % 100}` } }));
await iii.shutdown?.();
process.exit(0);
