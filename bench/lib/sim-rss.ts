/**
 * The scale simulation's (bench/sim-scale.ts) reading of its nodes' memory from /proc, and how it
 * prints an RSS series: first and last sample, the median across nodes each minute, least-squares slopes.
 */
import { readFileSync } from 'node:fs';

export function pct(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

export function rssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return Number(m?.[1]) / 1024;
  } catch {
    return Number.NaN;
  }
}

/** RssAnon and RssFile of a process, MB. */
export function rssParts(pid: number): number[] {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return ['RssAnon', 'RssFile'].map((key) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(status)?.[1]) / 1024);
  } catch {
    return [Number.NaN, Number.NaN];
  }
}

/** A process's RSS by kind of mapping, MB: glibc's main malloc arena (`[heap]`), other anonymous memory, files. */
export interface RssByMapping {
  heap: number;
  anon: number;
  file: number;
}

/**
 * Sums `/proc/<pid>/smaps` text's Rss lines by mapping: `[heap]` (the brk heap: the main thread's
 * malloc), anonymous (V8's pages, other threads' malloc arenas, stacks: `[stack]`, `[anon:…]` or no
 * name), and file-backed (the binary, libraries, `[vdso]`-like specials counted with them).
 */
export function parseSmaps(text: string): RssByMapping {
  const out: RssByMapping = { heap: 0, anon: 0, file: 0 };
  let kind: keyof RssByMapping = 'anon';
  for (const line of text.split('\n')) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+(?:\s+(.*))?$/.exec(line);
    if (header !== null) {
      const name = header[1]?.trim() ?? '';
      kind = name === '[heap]' ? 'heap' : name === '' || name === '[stack]' || name.startsWith('[anon') ? 'anon' : 'file';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss !== null) out[kind] += Number(rss[1]) / 1024;
  }
  return out;
}

/** {@link parseSmaps} of a live process; NaNs when it is gone. */
export function rssByMapping(pid: number): RssByMapping {
  try {
    return parseSmaps(readFileSync(`/proc/${pid}/smaps`, 'utf8'));
  } catch {
    return { heap: Number.NaN, anon: Number.NaN, file: Number.NaN };
  }
}

/** Least-squares slope of MB over minutes (NaN under 3 samples). */
export function slope(series: { min: number; mb: number }[]): number {
  if (series.length < 3) return Number.NaN;
  const mx = series.reduce((a, x) => a + x.min, 0) / series.length;
  const my = series.reduce((a, x) => a + x.mb, 0) / series.length;
  const sxy = series.reduce((a, x) => a + (x.min - mx) * (x.mb - my), 0);
  const sxx = series.reduce((a, x) => a + (x.min - mx) ** 2, 0);
  return sxx === 0 ? Number.NaN : sxy / sxx;
}

export function fmt(values: number[], digits = 0): string {
  return values.map((v) => (Number.isFinite(v) ? v.toFixed(digits) : '–')).join('/');
}

export type RssSeries = { min: number; mb: number; pid: number; maps?: RssByMapping }[];

/**
 * Each node's child RSS series (samples of its current child only): first and last sample, the median
 * (max) across nodes once a minute, and the least-squares slope over the series and its second half.
 */
export function printRss(label: string, series: RssSeries[], pids: number[], everyMs: number): void {
  const same = series.map((s, i) => s.filter((x) => x.pid === pids[i] && Number.isFinite(x.mb)));
  const span = same.map((s) => (s.length < 2 ? 0 : s.at(-1)!.min - s[0]!.min));
  console.log(`${label}child RSS MB under churn, first sample: ${fmt(same.map((s) => s[0]?.mb ?? Number.NaN))}`);
  console.log(`${label}child RSS MB under churn, last sample:  ${fmt(same.map((s) => s.at(-1)?.mb ?? Number.NaN))}  (${(Math.max(...span) * 60).toFixed(0)} s apart, every ${everyMs / 1000} s)`);
  // The curve: median and max across nodes, once a minute (runs of a minute or more).
  const minutes = Math.floor(Math.max(...span));
  if (minutes >= 1) {
    const at = (m: number): string => {
      const values = same.map((s) => s.find((x) => x.min - s[0]!.min >= m - 1e-9)?.mb ?? Number.NaN).filter(Number.isFinite);
      return `${pct(values, 50).toFixed(0)} (${Math.max(...values).toFixed(0)})`;
    };
    console.log(`${label}child RSS MB under churn, median (max) across nodes, each minute: ${Array.from({ length: minutes + 1 }, (_, m) => at(m)).join(', ')}`);
  }
  const slopes = same.map((s) => slope(s));
  const lateSlopes = same.map((s) => slope(s.slice(Math.floor(s.length / 2))));
  const range = (values: number[]): string => {
    const finite = values.filter(Number.isFinite);
    if (finite.length === 0) return 'under 3 samples';
    return `min ${Math.min(...finite).toFixed(2)}, median ${pct(finite, 50).toFixed(2)}, max ${Math.max(...finite).toFixed(2)}`;
  };
  console.log(`${label}child RSS slope MB/min, whole window: ${fmt(slopes, 2)}  (${range(slopes)})`);
  console.log(`${label}child RSS slope MB/min, second half:  ${fmt(lateSlopes, 2)}  (${range(lateSlopes)})`);
  // A slope over 10 minutes of a saw-tooth (a full GC about once a minute, a few MB deep) moves by
  // ±0.3 MB/min from node to node with no growth at all. The median of the window's last 3 minutes
  // against the median of its first 3 (18 samples each at 10 s) reads past the teeth.
  const ends = same.map((s) => (s.length < 2 ? Number.NaN : windowRise(s, s[0]!.min, s.at(-1)!.min, (x) => x.mb)));
  const over = ends.filter((d) => d > FLAT_RISE_MB).length;
  console.log(
    `${label}child RSS rise MB, median of the last 3 min − median of the first 3: ${fmt(ends, 1)}  (${range(ends)}; ${over} of ${ends.length} nodes over ${FLAT_RISE_MB} MB)`,
  );
}

/** Each node's window rise (as {@link printRss}'s) of its RSS by kind of mapping, for series sampled with `maps`. */
export function printMappings(label: string, series: RssSeries[], pids: number[]): void {
  const same = series.map((s, i) => s.filter((x) => x.pid === pids[i] && x.maps !== undefined && Number.isFinite(x.maps.heap)));
  const kinds = [
    ['heap', "glibc's main malloc arena ([heap])"],
    ['anon', "other anonymous (V8's pages, other threads' malloc arenas, stacks)"],
    ['file', 'file-backed'],
  ] as const;
  for (const [key, what] of kinds) {
    const rises = same.map((s) => (s.length < 2 ? Number.NaN : windowRise(s, s[0]!.min, s.at(-1)!.min, (x) => x.maps![key])));
    console.log(`${label}child RSS rise MB (same rule), ${what}: ${fmt(rises, 1)}`);
  }
}

/**
 * Median of a window's last 3 minutes (a third of it, if shorter than 9) against the median of its first
 * 3, of one value of samples taken at `min` minutes; NaN when either end has no sample.
 */
export function windowRise<T extends { min: number }>(samples: T[], from: number, to: number, value: (s: T) => number): number {
  const third = Math.min(3, (to - from) / 3);
  const first = samples.filter((s) => s.min >= from && s.min - from <= third).map(value);
  const last = samples.filter((s) => s.min <= to && to - s.min <= third).map(value);
  if (first.length === 0 || last.length === 0) return Number.NaN;
  return pct(last, 50) - pct(first, 50);
}

/** What a node's RSS may rise over a window and still count as flat (2.5 MB: under 2 % of a child). */
export const FLAT_RISE_MB = 2.5;

/** How long a process has run, in minutes (/proc: its start in clock ticks after boot). */
export function ageMin(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const started = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]) / 100;
  const uptime = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
  return (uptime - started) / 60;
}
