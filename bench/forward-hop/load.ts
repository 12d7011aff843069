import { createHistogram } from 'node:perf_hooks';
import { performance } from 'node:perf_hooks';

export interface LoadResult {
  calls: number;
  errors: number;
  callsPerSecond: number;
  p50Us: number;
  p99Us: number;
}

/**
 * Closed loop: `concurrency` callers, each starting its next call when the previous one returns,
 * for `durationMs` after a `warmupMs` whose calls are not counted. `call` resolves to whether the
 * answer was right (an echo of what was sent).
 */
export async function closedLoop(
  call: () => Promise<boolean>,
  options: { concurrency: number; durationMs: number; warmupMs: number },
): Promise<LoadResult> {
  const histogram = createHistogram();
  let measuring = false;
  let calls = 0;
  let errors = 0;
  const warmupEnd = performance.now() + options.warmupMs;
  const end = warmupEnd + options.durationMs;
  let startedAt = 0;
  const caller = async (): Promise<void> => {
    for (;;) {
      const t0 = performance.now();
      if (t0 >= end) return;
      if (!measuring && t0 >= warmupEnd) {
        measuring = true;
        startedAt = t0;
      }
      const ok = await call();
      if (!measuring) continue;
      const t1 = performance.now();
      // Calls that straddle the end are still counted: they ran inside the window.
      histogram.record(Math.max(1, Math.round((t1 - t0) * 1000)));
      calls += 1;
      if (!ok) errors += 1;
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, caller));
  const elapsedMs = performance.now() - startedAt;
  return {
    calls,
    errors,
    callsPerSecond: calls / (elapsedMs / 1000),
    p50Us: histogram.percentile(50),
    p99Us: histogram.percentile(99),
  };
}
