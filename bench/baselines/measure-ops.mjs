// The benchmark loops both sides of a row share, so they are measured the same way:
// - measureOps: COUNT calls of one operation with IN_FLIGHT outstanding, timed per call; prints one
//   JSON line {op, count, seconds, perSecond, p50Ms, p99Ms}. Baseline (8) and the state-bench worker.
// - enqueueToRun: COUNT messages enqueued with IN_FLIGHT enqueues outstanding, latency from enqueue
//   start to run start (wall clock, one host); prints {count, seconds, perSecond, p50Ms, p99Ms} once
//   every message ran. Baseline (7) and the queue-bench worker.
import { performance } from 'node:perf_hooks';

/** Calls `call(i)` for i = 0 … count−1, `inFlight` at a time. */
async function inFlightLoop(count, inFlight, call) {
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) await call(next++);
    }),
  );
}

function summary(count, seconds, latencies) {
  latencies.sort((a, b) => a - b);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  return { count, seconds, perSecond: count / seconds, p50Ms: at(0.5), p99Ms: at(0.99) };
}

export async function measureOps(op, count, inFlight, call) {
  const latencies = [];
  const started = performance.now();
  await inFlightLoop(count, inFlight, async (i) => {
    const t = performance.now();
    await call(i);
    latencies.push(performance.now() - t);
  });
  console.log(JSON.stringify({ op, ...summary(count, (performance.now() - started) / 1000, latencies) }));
}

/**
 * Enqueue-to-run for `count` messages: the consumer calls `ran(payload)` when a message starts to
 * run; `measure(inFlight, enqueue)` enqueues every message as `enqueue({t})` and prints the line once
 * all of them ran.
 */
export function enqueueToRun(count) {
  const latencies = [];
  let done;
  const finished = new Promise((resolve) => (done = resolve));
  return {
    ran(payload) {
      latencies.push(Date.now() - payload.t);
      if (latencies.length === count) done();
    },
    async measure(inFlight, enqueue) {
      const started = Date.now();
      await inFlightLoop(count, inFlight, () => enqueue({ t: Date.now() }));
      await finished;
      console.log(JSON.stringify(summary(count, (Date.now() - started) / 1000, latencies)));
    },
  };
}

/** The value both sides write: a small JSON object, as an app's record would be. */
export const benchValue = (i) => ({ id: i, name: `item ${i}`, tags: ['a', 'b'], done: i % 2 === 0 });
