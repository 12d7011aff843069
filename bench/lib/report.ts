import { median } from './load.js';
import type { Member, Sample } from './members.js';
import { smoke } from './options.js';
import type { Resource } from './subjects.js';

/** Groups, rows and checks as the suite reports them: the tables of docs/performance.md. */

/** One line of the load table: a scenario paired with its baseline. */
export interface Row {
  name: string;
  scenario: string;
  baseline: string;
  /** Throughput ratio to reach (p99 may grow by at most its inverse); none: informational. */
  target?: number;
  /** The row's target is a per-middleware cost of at most 10 %, over `middlewares`. */
  middlewares?: number;
  /** Informational: note the cost per middleware over this many, no target. */
  middlewareNote?: number;
  /** Show the forwarded share of the scenario's requests. */
  forwarded?: boolean;
  /** The target is on total CPU per request (server + workers): scenario at most this times the baseline. */
  cpuTarget?: number;
  /** The target is on the server side's CPU per request (engine processes only): scenario at most this times the baseline. */
  serverCpuTarget?: number;
  /** The target is on latency one request at a time: scenario p50 at most this many µs over the baseline's. */
  p50OverUs?: number;
  /** Informational: note the CPU per request of each part of both setups (the members' roles), no target. */
  rolesNote?: boolean;
  /** Informational: note the scenario's p50 and p99 over the baseline's, in µs, no target. */
  p50Note?: boolean;
}

/** `nginx 31 + node A 56 + …` (µs per request, medians over rounds) of the samples' roles, in their order. */
export function rolesText(xs: Sample[]): string {
  const names = Object.keys(xs[0]?.cpu.roles ?? {});
  const parts = names.map((name) => `${name} ${median(xs.map((x) => x.cpu.roles?.[name] ?? Number.NaN)).toFixed(0)}`);
  const total = median(xs.map((x) => Object.values(x.cpu.roles ?? {}).reduce((sum, us) => sum + us, 0)));
  return `${parts.join(' + ')} = ${total.toFixed(0)}`;
}

/** Subjects measured in alternation, and the rows that pair them. */
export interface LoadGroup {
  kind: 'load';
  name: string;
  resources: Resource<unknown>[];
  members: Record<string, Member>;
  /** Run order within a round: baselines and scenarios alternate. */
  order: string[];
  rows: Row[];
}

export const int = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a');
export const ms = (n: number): string => (Number.isFinite(n) ? (n < 1 ? n.toFixed(3) : n.toFixed(2)) : 'n/a');
export const spread = (values: number[], fmt: (n: number) => string): string =>
  values.length === 1 ? fmt(values[0] as number) : `${fmt(median(values))} (${fmt(Math.min(...values))}–${fmt(Math.max(...values))})`;

export interface Verdict {
  pass: boolean | undefined;
  text: string;
}

export function verdict(row: Row, samples: Record<string, Sample[]>, pairedWith: string): { cells: string[]; verdict: Verdict } {
  const s = samples[row.scenario] ?? [];
  const b = samples[row.baseline] ?? [];
  // Ratios are taken within each round (the two ran seconds apart), then the median over rounds.
  const perRound = (pick: (x: Sample) => number): number =>
    median(s.map((x, i) => pick(x) / pick(b[i] as Sample)).filter((r) => Number.isFinite(r)));
  const ratio = perRound((x) => x.rps);
  const p99Ratio = perRound((x) => x.p99Ms);
  const errors = s.reduce((sum, x) => sum + x.errors, 0);
  const required = row.middlewares !== undefined ? 1 - 0.1 * row.middlewares : row.target;
  let targetText = '—';
  let result: Verdict = { pass: undefined, text: 'info' };
  const notes: string[] = [];
  const perMiddleware = row.middlewares ?? row.middlewareNote;
  if (perMiddleware !== undefined) {
    notes.push(`cost per middleware ${(((1 - ratio) / perMiddleware) * 100).toFixed(1)} % of a plain request`);
  }
  if (required !== undefined) {
    targetText = row.middlewares !== undefined ? `≤ 10 %/mw (≥ ${required.toFixed(2)})` : `≥ ${required.toFixed(2)}`;
    const pass = ratio >= required && p99Ratio <= 1 / required && errors === 0;
    result = { pass, text: smoke ? `(${pass ? 'pass' : 'fail'}, smoke)` : pass ? '**PASS**' : '**FAIL**' };
    if (ratio >= required && p99Ratio > 1 / required) notes.push('p99 grew more than throughput fell');
    if (errors > 0) notes.push(`${errors} errors`);
  }
  if (row.cpuTarget !== undefined) {
    const cpuRatio = perRound((x) => x.cpu.serverUs + x.cpu.workerUs);
    // With a throughput target too, both must hold.
    const throughputPass = required === undefined || result.pass === true;
    targetText = required === undefined ? `CPU/req ≤ ${row.cpuTarget.toFixed(2)}×` : `${targetText}, CPU/req ≤ ${row.cpuTarget.toFixed(2)}×`;
    const pass = cpuRatio <= row.cpuTarget && errors === 0 && throughputPass;
    result = { pass, text: smoke ? `(${pass ? 'pass' : 'fail'}, smoke)` : pass ? '**PASS**' : '**FAIL**' };
    notes.push(`total CPU/req ratio ${cpuRatio.toFixed(2)}`);
  }
  if (row.serverCpuTarget !== undefined) {
    const serverRatio = perRound((x) => x.cpu.serverUs);
    targetText = `server CPU/req ≤ ${row.serverCpuTarget.toFixed(2)}×`;
    const pass = serverRatio <= row.serverCpuTarget && errors === 0;
    result = { pass, text: smoke ? `(${pass ? 'pass' : 'fail'}, smoke)` : pass ? '**PASS**' : '**FAIL**' };
    notes.push(`engine CPU/req ratio ${serverRatio.toFixed(2)}`);
  }
  if (row.p50OverUs !== undefined || row.p50Note === true) {
    // Differences within each round, then the median over rounds (µs).
    const over = (pick: (x: Sample) => number): number => median(s.map((x, i) => (pick(x) - pick(b[i] as Sample)) * 1000));
    const p50Over = over((x) => x.p50Ms);
    const p99Over = over((x) => x.p99Ms);
    if (row.p50OverUs !== undefined) {
      targetText = `p50 ≤ +${row.p50OverUs} µs`;
      const pass = p50Over <= row.p50OverUs && errors === 0;
      result = { pass, text: smoke ? `(${pass ? 'pass' : 'fail'}, smoke)` : pass ? '**PASS**' : '**FAIL**' };
    }
    notes.push(`p50 ${p50Over >= 0 ? '+' : ''}${p50Over.toFixed(0)} µs, p99 ${p99Over >= 0 ? '+' : ''}${p99Over.toFixed(0)} µs over the baseline`);
  }
  if (row.rolesNote === true) {
    notes.push(`CPU µs/req by process (all of them, the load generator included): ${rolesText(s)}, against ${rolesText(b)}`);
  }
  if (row.forwarded === true) {
    const total = s.reduce((sum, x) => sum + x.requests, 0);
    const marked = s.reduce((sum, x) => sum + x.marked, 0);
    notes.push(`${((marked / Math.max(total, 1)) * 100).toFixed(1)} % forwarded`);
  }
  const maxRss = (xs: Sample[]): string => {
    const values = xs.map((x) => x.rssMb).filter((x): x is number => x !== undefined);
    return values.length === 0 ? '—' : Math.max(...values).toFixed(0);
  };
  const side = (xs: Sample[]): string[] => [
    spread(xs.map((x) => x.rps), int),
    spread(xs.map((x) => x.p50Ms), ms),
    spread(xs.map((x) => x.p99Ms), ms),
    String(xs.reduce((sum, x) => sum + x.errors, 0)),
    `${median(xs.map((x) => x.cpu.serverUs)).toFixed(0)} + ${median(xs.map((x) => x.cpu.workerUs)).toFixed(0)}`,
    median(xs.map((x) => x.cpu.serverSyscalls)).toFixed(1),
  ];
  return {
    cells: [
      row.name,
      pairedWith,
      ...side(s),
      ...side(b),
      ratio.toFixed(2),
      p99Ratio.toFixed(2),
      perRound((x) => x.cpu.serverUs).toFixed(2),
      targetText,
      result.text,
      `${maxRss(s)} / ${maxRss(b)}`,
      notes.join('; '),
    ],
    verdict: result,
  };
}

export const HEADER = [
  'scenario',
  'paired with',
  'req/s',
  'p50 ms',
  'p99 ms',
  'err',
  'CPU µs/req server + workers',
  'server syscalls/req',
  'baseline req/s',
  'baseline p50 ms',
  'baseline p99 ms',
  'baseline err',
  'baseline CPU µs/req',
  'baseline syscalls/req',
  'ratio req/s',
  'ratio p99',
  'ratio server CPU/req',
  'target (req/s ratio)',
  'result',
  'max RSS MB per process (scenario / baseline)',
  'notes',
];

export const tableRow = (cells: string[]): string => `| ${cells.join(' | ')} |`;

export interface ScaleRow {
  check: string;
  result: string;
  target: string;
  pass: boolean | undefined;
}

/** A check that runs on its own and reports rows of its own (scale, streaming). */
export interface CheckGroup {
  kind: 'check';
  name: string;
  run(): Promise<ScaleRow[]> | ScaleRow[];
}

/** One scenario module's export: a load group (subjects in alternation) or a check. */
export type Scenario = LoadGroup | CheckGroup;

export const passText = (pass: boolean | undefined): string =>
  pass === undefined ? 'info' : smoke ? `(${pass ? 'pass' : 'fail'}, smoke)` : pass ? '**PASS**' : '**FAIL**';
