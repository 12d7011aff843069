/**
 * The soak's verdict, as a plain function over samples (docs/soak.md#verdict).
 *
 * Samples taken during the warm-up are ignored. The rest are split by time into thirds; for every
 * engine process the median of the first third is compared with the median of the last third:
 *   - heap after GC is flat when it grew by less than `heapGrowthBytes` OR by less than
 *     `heapGrowthRatio` of its first-third value;
 *   - open fds and sockets are compared with the process's connected workers subtracted (each worker
 *     socket is one fd on the child that accepted it, and churn moves that number up and down), and
 *     are flat when the difference is within ±`descriptorSlack`.
 * A process whose pid changed (a restarted child) or that has too few samples is not flat either.
 * RSS and external memory are reported, not judged: the allocator keeps freed pages for reuse, so RSS
 * can rise and stay up without anything being retained.
 */
export interface ProcessSample {
  /** Milliseconds since the soak started. */
  tMs: number;
  /** Stable name: `primary`, `child0`, `child1`, … */
  process: string;
  pid: number;
  heapUsedBytes: number;
  externalBytes: number;
  rssBytes: number;
  fds: number;
  sockets: number;
  /** Worker sockets connected to this process (0 for the primary). */
  workers: number;
}

export interface Tolerances {
  heapGrowthBytes: number;
  heapGrowthRatio: number;
  descriptorSlack: number;
}

export const DEFAULT_TOLERANCES: Tolerances = { heapGrowthBytes: 5 * 1024 * 1024, heapGrowthRatio: 0.1, descriptorSlack: 10 };

export interface Comparison {
  first: number;
  last: number;
  growth: number;
}

export interface ProcessVerdict {
  process: string;
  samples: number;
  heap: Comparison;
  rss: Comparison;
  external: Comparison;
  /** fds minus connected workers. */
  fds: Comparison;
  /** sockets minus connected workers. */
  sockets: Comparison;
  flat: boolean;
  reasons: string[];
}

export interface Verdict {
  flat: boolean;
  processes: ProcessVerdict[];
  reasons: string[];
}

export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

function compare(first: ProcessSample[], last: ProcessSample[], pick: (s: ProcessSample) => number): Comparison {
  const a = median(first.map(pick));
  const b = median(last.map(pick));
  return { first: a, last: b, growth: b - a };
}

const MB = 1024 * 1024;
const mb = (bytes: number): string => `${(bytes / MB).toFixed(1)} MB`;

/** The verdict over `samples`, ignoring those before `warmupMs`. Needs ≥ 3 samples per process after it. */
export function judge(samples: ProcessSample[], warmupMs: number, tolerances: Tolerances = DEFAULT_TOLERANCES): Verdict {
  const measured = samples.filter((s) => s.tMs >= warmupMs);
  const names = [...new Set(samples.map((s) => s.process))];
  const processes: ProcessVerdict[] = [];
  const reasons: string[] = [];
  if (names.length === 0) reasons.push('no samples');

  for (const name of names) {
    const own = measured.filter((s) => s.process === name).sort((a, b) => a.tMs - b.tMs);
    const verdictReasons: string[] = [];
    const pids = new Set(samples.filter((s) => s.process === name).map((s) => s.pid));
    if (pids.size > 1) verdictReasons.push(`${name}: pid changed (${[...pids].join(' → ')}): the process was restarted`);

    if (own.length < 3) {
      verdictReasons.push(`${name}: ${own.length} samples after warm-up, need at least 3`);
      const empty = { first: Number.NaN, last: Number.NaN, growth: Number.NaN };
      processes.push({ process: name, samples: own.length, heap: empty, rss: empty, external: empty, fds: empty, sockets: empty, flat: false, reasons: verdictReasons });
      reasons.push(...verdictReasons);
      continue;
    }
    // Thirds by time, so an uneven sampling rhythm does not shift the windows.
    const start = (own[0] as ProcessSample).tMs;
    const span = (own[own.length - 1] as ProcessSample).tMs - start;
    let first = own.filter((s) => s.tMs <= start + span / 3);
    let last = own.filter((s) => s.tMs >= start + (2 * span) / 3);
    if (first.length === 0 || last.length === 0) {
      first = own.slice(0, 1);
      last = own.slice(-1);
    }

    const heap = compare(first, last, (s) => s.heapUsedBytes);
    const fds = compare(first, last, (s) => s.fds - s.workers);
    const sockets = compare(first, last, (s) => s.sockets - s.workers);
    const heapFlat = heap.growth < tolerances.heapGrowthBytes || heap.growth < heap.first * tolerances.heapGrowthRatio;
    if (!heapFlat) {
      verdictReasons.push(
        `${name}: heap after GC grew ${mb(heap.growth)} (${mb(heap.first)} → ${mb(heap.last)}, +${((heap.growth / heap.first) * 100).toFixed(1)} %), ` +
          `over both ${mb(tolerances.heapGrowthBytes)} and ${(tolerances.heapGrowthRatio * 100).toFixed(0)} %`,
      );
    }
    if (Math.abs(fds.growth) > tolerances.descriptorSlack) {
      verdictReasons.push(`${name}: open fds (minus workers) moved ${fds.growth} (${fds.first} → ${fds.last}), beyond ±${tolerances.descriptorSlack}`);
    }
    if (Math.abs(sockets.growth) > tolerances.descriptorSlack) {
      verdictReasons.push(`${name}: open sockets (minus workers) moved ${sockets.growth} (${sockets.first} → ${sockets.last}), beyond ±${tolerances.descriptorSlack}`);
    }
    processes.push({
      process: name,
      samples: own.length,
      heap,
      rss: compare(first, last, (s) => s.rssBytes),
      external: compare(first, last, (s) => s.externalBytes),
      fds,
      sockets,
      flat: verdictReasons.length === 0,
      reasons: verdictReasons,
    });
    reasons.push(...verdictReasons);
  }
  return { flat: reasons.length === 0, processes, reasons };
}
