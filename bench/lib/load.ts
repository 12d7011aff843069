import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';

/**
 * A closed-loop load generator on undici: `connections` keep-alive connections, each with exactly one
 * request in flight, for `durationMs` after a warm-up. Latencies are recorded per request.
 */
export interface LoadOptions {
  url: string;
  connections: number;
  durationMs: number;
  warmupMs: number;
  method?: string;
  body?: string;
  headers?: Record<string, string>;
  /** Status that counts as success (default 200). */
  expectStatus?: number;
}

export interface LoadResult {
  requests: number;
  errors: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const url = new URL(options.url);
  const pool = new Pool(url.origin, { connections: options.connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const path = url.pathname + url.search;
  const expected = options.expectStatus ?? 200;
  const latencies: number[] = [];
  let errors = 0;
  let measuring = false;
  let stop = false;

  const loop = async (): Promise<void> => {
    while (!stop) {
      const started = performance.now();
      try {
        const res = await pool.request({
          path,
          method: options.method ?? 'GET',
          headers: options.headers,
          body: options.body,
        });
        await res.body.dump();
        if (measuring) {
          if (res.statusCode === expected) latencies.push(performance.now() - started);
          else errors++;
        }
      } catch {
        if (measuring) errors++;
      }
    }
  };

  const loops = Array.from({ length: options.connections }, () => loop());
  await new Promise((r) => setTimeout(r, options.warmupMs));
  measuring = true;
  const began = performance.now();
  await new Promise((r) => setTimeout(r, options.durationMs));
  measuring = false;
  const elapsed = performance.now() - began;
  stop = true;
  await Promise.all(loops);
  await pool.close();

  const sorted = Float64Array.from(latencies).sort();
  return {
    requests: latencies.length,
    errors,
    rps: latencies.length / (elapsed / 1000),
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
  };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}
