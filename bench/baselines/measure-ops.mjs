// COUNT calls of one operation with IN_FLIGHT outstanding, timed per call; prints one JSON line
// {op, count, seconds, perSecond, p50Ms, p99Ms}. Shared by baseline (8) and the state-bench worker so
// both sides of the state row are measured by the same loop.
import { performance } from 'node:perf_hooks';

export async function measureOps(op, count, inFlight, call) {
  const latencies = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) {
        const i = next++;
        const t = performance.now();
        await call(i);
        latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  console.log(JSON.stringify({ op, count, seconds, perSecond: count / seconds, p50Ms: at(0.5), p99Ms: at(0.99) }));
}

/** The value both sides write: a small JSON object, as an app's record would be. */
export const benchValue = (i) => ({ id: i, name: `item ${i}`, tags: ['a', 'b'], done: i % 2 === 0 });
