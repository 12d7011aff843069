// The Switchyard side of the queue row: one iii-sdk worker that enqueues COUNT calls with
// TriggerAction.Enqueue (IN_FLIGHT outstanding) to queue `bench` and serves the function they run.
// Prints the same JSON line as baseline (7): {count, seconds, perSecond, p50Ms, p99Ms}.
import { registerWorker, TriggerAction } from 'iii-sdk';

const count = Number(process.env.COUNT);
const inFlight = Number(process.env.IN_FLIGHT ?? 64);
const iii = registerWorker(process.env.III_URL, { workerName: 'queue-bench' });
const latencies = [];
let done;
const finished = new Promise((resolve) => (done = resolve));
iii.registerFunction('bench::job', async (payload) => {
  latencies.push(Date.now() - payload.t);
  if (latencies.length === count) done();
  return null;
});
// The function must be in the table before the first message runs (else the first attempts wait for it).
await new Promise((r) => setTimeout(r, 500));
const started = Date.now();
let next = 0;
await Promise.all(
  Array.from({ length: inFlight }, async () => {
    while (next < count) {
      next++;
      await iii.trigger({ function_id: 'bench::job', payload: { t: Date.now() }, action: TriggerAction.Enqueue({ queue: 'bench' }) });
    }
  }),
);
await finished;
const seconds = (Date.now() - started) / 1000;
latencies.sort((a, b) => a - b);
const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
console.log(JSON.stringify({ count, seconds, perSecond: count / seconds, p50Ms: at(0.5), p99Ms: at(0.99) }));
await iii.shutdown?.();
process.exit(0);
