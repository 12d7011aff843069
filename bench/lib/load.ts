import { performance } from 'node:perf_hooks';
import type { Dispatcher } from 'undici';
import { Pool } from 'undici';

/**
 * A closed-loop load generator on undici: `connections` keep-alive connections, each with exactly one
 * request in flight, for `durationMs` after a warm-up. Latencies are recorded per request.
 *
 * Requests go through undici's low-level `dispatch` with a callback handler: no promise, no body
 * stream, no header object per request. The generator shares the machine with what it measures, so
 * every microsecond it spends is one the server under test does not get.
 */
export interface LoadOptions {
  url: string;
  connections: number;
  durationMs: number;
  warmupMs: number;
  method?: string;
  body?: string | Buffer;
  headers?: Record<string, string>;
  /** Status that counts as success (default 200). */
  expectStatus?: number;
  /** Counts responses whose header `mark.header` passes `mark.test` (reported as `marked`). */
  mark?: { header: string; test: (value: string) => boolean };
  /** Called synchronously when the measured window opens and when it closes (CPU accounting). */
  onMeasure?: { start(): void; end(): void };
}

export interface LoadResult {
  requests: number;
  errors: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** The tail's shape, for investigations (not in the report). */
  p90Ms: number;
  maxMs: number;
  /** Successful measured responses that passed `mark` (0 without `mark`). */
  marked: number;
  /** Length of the measured window. */
  elapsedMs: number;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}

/** Load through a keep-alive Pool of `connections` connections (the usual case). */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const url = new URL(options.url);
  const pool = new Pool(url.origin, { connections: options.connections, pipelining: 1, keepAliveTimeout: 60_000 });
  try {
    return await runLoadOn(Array.from({ length: options.connections }, () => pool), options);
  } finally {
    await pool.close();
  }
}

/**
 * Load through the given dispatchers, one closed loop per entry (an entry may repeat: a Pool listed
 * N times runs N loops). Used with single-connection Clients pinned to one engine process. The
 * dispatchers are not closed here; `options.connections` is ignored.
 */
export async function runLoadOn(dispatchers: Dispatcher[], options: LoadOptions): Promise<LoadResult> {
  const url = new URL(options.url);
  const expected = options.expectStatus ?? 200;
  const markName = options.mark?.header.toLowerCase();
  const markTest = options.mark?.test;
  const request: Dispatcher.DispatchOptions = {
    origin: url.origin,
    path: url.pathname + url.search,
    method: options.method ?? 'GET',
    headers: options.headers,
    body: typeof options.body === 'string' ? Buffer.from(options.body) : options.body,
    headersTimeout: 10_000,
    bodyTimeout: 10_000,
  };
  const latencies: number[] = [];
  let errors = 0;
  let marked = 0;
  let measuring = false;
  let stop = false;
  let running = dispatchers.length;
  let allStopped: () => void = () => undefined;
  const stopped = new Promise<void>((resolve) => {
    allStopped = resolve;
  });

  const loop = (dispatcher: Dispatcher): void => {
    const next = (): void => {
      if (stop) {
        if (--running === 0) allStopped();
        return;
      }
      const started = performance.now();
      let status = 0;
      let isMarked = false;
      dispatcher.dispatch(request, {
        onConnect: () => undefined,
        onHeaders: (statusCode: number, rawHeaders: Buffer[]) => {
          status = statusCode;
          if (markName !== undefined && markTest !== undefined) {
            for (let i = 0; i < rawHeaders.length; i += 2) {
              if (rawHeaders[i]!.length === markName.length && rawHeaders[i]!.toString('latin1').toLowerCase() === markName) {
                isMarked = markTest(rawHeaders[i + 1]!.toString('latin1'));
              }
            }
          }
          return true;
        },
        onData: () => true,
        onComplete: () => {
          if (measuring) {
            if (status === expected) {
              latencies.push(performance.now() - started);
              if (isMarked) marked++;
            } else {
              errors++;
            }
          }
          queueMicrotask(next);
        },
        onError: () => {
          if (measuring) errors++;
          // A refused or reset connection fails at once: do not spin on it.
          setTimeout(next, 1);
        },
      });
    };
    next();
  };

  for (const dispatcher of dispatchers) loop(dispatcher);
  await new Promise((r) => setTimeout(r, options.warmupMs));
  options.onMeasure?.start();
  measuring = true;
  const began = performance.now();
  await new Promise((r) => setTimeout(r, options.durationMs));
  measuring = false;
  const elapsed = performance.now() - began;
  options.onMeasure?.end();
  stop = true;
  // Every loop ends with its request in flight; a request that never ends (it times out in 10 s)
  // cannot hold the run hostage beyond that.
  if (dispatchers.length > 0) await Promise.race([stopped, new Promise((r) => setTimeout(r, 11_000))]);

  const sorted = Float64Array.from(latencies).sort();
  return {
    requests: latencies.length,
    errors,
    rps: latencies.length / (elapsed / 1000),
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    p90Ms: percentile(sorted, 90),
    maxMs: sorted.length === 0 ? Number.NaN : (sorted[sorted.length - 1] as number),
    marked,
    elapsedMs: elapsed,
  };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}
