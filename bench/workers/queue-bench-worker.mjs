// The Switchyard side of the queue row: one iii-sdk worker that enqueues COUNT calls with
// TriggerAction.Enqueue (IN_FLIGHT outstanding) to queue `bench` and serves the function they run.
// Measured by the same loop as baseline (7) (../baselines/measure-ops.mjs, enqueueToRun).
import { registerWorker, TriggerAction } from 'iii-sdk';
import { enqueueToRun } from '../baselines/measure-ops.mjs';

const count = Number(process.env.COUNT);
const inFlight = Number(process.env.IN_FLIGHT ?? 64);
const iii = registerWorker(process.env.III_URL, { workerName: 'queue-bench' });
const run = enqueueToRun(count);
iii.registerFunction('bench::job', async (payload) => {
  run.ran(payload);
  return null;
});
// The function must be in the table before the first message runs (else the first attempts wait for it).
await new Promise((r) => setTimeout(r, 500));
await run.measure(inFlight, (payload) => iii.trigger({ function_id: 'bench::job', payload, action: TriggerAction.Enqueue({ queue: 'bench' }) }));
await iii.shutdown?.();
process.exit(0);
