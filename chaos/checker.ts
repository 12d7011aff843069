/**
 * The verdict of a chaos run, computed from its records alone (no I/O), so it can be unit-tested and
 * re-run over a saved `.chaos-results/*.jsonl`.
 */

/** One request as the load generator saw it. Times are milliseconds since the run started. */
export interface RequestRecord {
  type: 'request';
  /** The request's unique token, sent in the body and the query. */
  token: string;
  conn: number;
  node: string;
  start: number;
  end: number;
  /** HTTP status, absent when no response arrived. */
  status?: number;
  /** The engine's error code (`error.code` of the envelope) for non-200 answers. */
  code?: string;
  /** Client-side error (socket reset, refused, …) when no response arrived. */
  err?: string;
  /** The 200 body echoed this request's token (body and query) and the digest of it. */
  tokenOk: boolean;
  /** The body carried the token of another request. */
  crossed: boolean;
  /** No answer within the client cutoff (well above the engine's request deadline). */
  hung: boolean;
  /** Replica that answered (from the body), when it did. */
  replica?: string;
}

/** A replica going down (killed, stopped) or coming back, as the harness did it. */
export interface ReplicaEvent {
  type: 'replica';
  at: number;
  replica: string;
  up: boolean;
}

/** How long the cluster took to show the expected owners again after a fault ended. */
export interface ConvergenceRecord {
  type: 'convergence';
  fault: number | 'initial' | 'final';
  kind: string;
  /** Milliseconds from the fault's end to a consistent view on every node; null = not within the limit. */
  ms: number | null;
  /** What was still wrong when the limit passed. */
  lastProblem?: string;
  /** Each problem seen while waiting, with when it was first seen (diagnosis only). */
  trail?: { ms: number; problem: string }[];
}

export interface CheckInput {
  requests: readonly RequestRecord[];
  replicaEvents: readonly ReplicaEvent[];
  /** Every replica of the run (all up at the start). */
  replicas: readonly string[];
  convergence: readonly ConvergenceRecord[];
  convergenceBoundMs: number;
  minSuccessRatio: number;
}

export interface Window {
  from: number;
  to: number;
}

export interface ChaosReport {
  total: number;
  ok: number;
  failed: number;
  hung: number;
  crossed: number;
  /** Failures by kind: `502 WORKER_DISCONNECTED`, `socket UND_ERR_SOCKET`, `hung`, … */
  failuresByKind: Record<string, number>;
  /** Requests issued while at least one replica was up: the base of the success ratio. */
  eligible: number;
  eligibleOk: number;
  successRatio: number;
  /** Windows in which the harness had every replica down (requests started in them are not counted). */
  allDown: Window[];
  convergedWorstMs: number | null;
  /** Human-readable reasons the run failed; empty when it passed. */
  problems: string[];
  passed: boolean;
}

export function isOk(r: RequestRecord): boolean {
  return r.status === 200 && r.tokenOk && !r.crossed && !r.hung;
}

export function failureKind(r: RequestRecord): string {
  if (r.hung) return 'hung';
  if (r.crossed) return 'crossed';
  if (r.status === undefined) return `socket ${r.err ?? 'unknown'}`;
  if (r.status !== 200) return `${r.status} ${r.code ?? '-'}`;
  return 'bad body';
}

/** Windows in which no replica was up, from the harness's own down/up events. */
export function allDownWindows(replicas: readonly string[], events: readonly ReplicaEvent[], endMs: number): Window[] {
  const down = new Set<string>();
  const windows: Window[] = [];
  let openedAt: number | undefined;
  for (const event of [...events].sort((a, b) => a.at - b.at)) {
    if (event.up) down.delete(event.replica);
    else down.add(event.replica);
    const allDown = replicas.length > 0 && replicas.every((r) => down.has(r));
    if (allDown && openedAt === undefined) openedAt = event.at;
    if (!allDown && openedAt !== undefined) {
      windows.push({ from: openedAt, to: event.at });
      openedAt = undefined;
    }
  }
  if (openedAt !== undefined) windows.push({ from: openedAt, to: endMs });
  return windows;
}

export function check(input: CheckInput): ChaosReport {
  const { requests } = input;
  const endMs = requests.reduce((max, r) => Math.max(max, r.end), 0);
  const allDown = allDownWindows(input.replicas, input.replicaEvents, endMs);
  const inAllDown = (at: number): boolean => allDown.some((w) => at >= w.from && at < w.to);

  let ok = 0;
  let hung = 0;
  let crossed = 0;
  let eligible = 0;
  let eligibleOk = 0;
  const failuresByKind: Record<string, number> = {};
  for (const r of requests) {
    const good = isOk(r);
    if (good) ok++;
    else {
      const kind = failureKind(r);
      failuresByKind[kind] = (failuresByKind[kind] ?? 0) + 1;
    }
    if (r.hung) hung++;
    if (r.crossed) crossed++;
    if (!inAllDown(r.start)) {
      eligible++;
      if (good) eligibleOk++;
    }
  }
  const successRatio = eligible === 0 ? 0 : eligibleOk / eligible;

  let convergedWorstMs: number | null = null;
  const problems: string[] = [];
  for (const c of input.convergence) {
    if (c.ms === null) {
      problems.push(`fault ${c.fault} (${c.kind}) did not converge${c.lastProblem === undefined ? '' : `: ${c.lastProblem}`}`);
      continue;
    }
    if (c.fault !== 'initial') convergedWorstMs = Math.max(convergedWorstMs ?? 0, c.ms);
    if (c.fault !== 'initial' && c.ms > input.convergenceBoundMs) {
      problems.push(`fault ${c.fault} (${c.kind}) converged in ${c.ms} ms, over the ${input.convergenceBoundMs} ms bound`);
    }
  }
  if (requests.length === 0) problems.push('no requests were made');
  if (hung > 0) problems.push(`${hung} request(s) hung`);
  if (crossed > 0) problems.push(`${crossed} response(s) carried another request's token`);
  if (eligible > 0 && successRatio < input.minSuccessRatio) {
    problems.push(`success ratio ${formatPercent(successRatio)} below ${formatPercent(input.minSuccessRatio)}`);
  }
  return {
    total: requests.length,
    ok,
    failed: requests.length - ok,
    hung,
    crossed,
    failuresByKind,
    eligible,
    eligibleOk,
    successRatio,
    allDown,
    convergedWorstMs,
    problems,
    passed: problems.length === 0,
  };
}

/** Two decimals, truncated (never rounds 98.996 % up to 99.00 %). */
export function formatPercent(ratio: number): string {
  return `${(Math.floor(ratio * 10_000) / 100).toFixed(2)}%`;
}

/** The last line a run prints. */
export function summaryLine(report: ChaosReport): string {
  const worst = report.convergedWorstMs === null ? 'n/a' : `${Math.round(report.convergedWorstMs)} ms`;
  return (
    `chaos: ${report.total} requests, ${report.ok} ok, ${report.failed} failed, ${report.hung} hung, ` +
    `${report.crossed} crossed, success ${formatPercent(report.successRatio)}, converged worst ${worst}`
  );
}
