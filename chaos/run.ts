/**
 * The chaos harness (docs/chaos.md): a Redis-mode cluster of two nodes under steady load while a
 * seeded schedule kills and stops workers, kills engine children and restarts Redis; then a verdict.
 *
 *   npm run chaos -- --seconds 20 [--seed S] [--connections 12] [--log-level warn]
 *
 * Every request and fault goes to .chaos-results/<timestamp>.jsonl, the engines' log lines beside it.
 * Exit code 0 only when every check passes; the last line printed is the one-line summary.
 */
import { createWriteStream } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT } from '../test/support/processes.js';
import type { ChaosReport, ConvergenceRecord, ReplicaEvent, RequestRecord } from './checker.js';
import { check, formatPercent, summaryLine } from './checker.js';
import type { ChaosCluster, ClusterSettings, ExpectedReplica, Replica } from './cluster.js';
import { awaitConvergence, awaitGone, childPidAt, startCluster } from './cluster.js';
import type { PlannedFault } from './faults.js';
import { generateSchedule, seedFrom } from './faults.js';
import { LoadGenerator } from './load.js';

// ------------------------------------------------------------------------------------------- options

const KNOWN_OPTIONS = ['--seconds', '--seed', '--connections', '--log-level'];

function usage(problem: string): never {
  console.error(`chaos: ${problem}\nusage: npm run chaos -- --seconds N [--seed S] [--connections N] [--log-level L]`);
  process.exit(2);
}

function option(name: string): string | undefined {
  const args = process.argv.slice(2);
  const at = args.indexOf(`--${name}`);
  if (at === -1) return undefined;
  const value = args[at + 1];
  if (value === undefined || value.startsWith('--')) usage(`--${name} needs a value`);
  return value;
}

function positiveInt(name: string, fallback: number): number {
  const text = option(name);
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) usage(`--${name} must be a positive integer, got ${text}`);
  return value;
}

for (const arg of process.argv.slice(2)) {
  if (arg.startsWith('--') && !KNOWN_OPTIONS.includes(arg)) usage(`unknown option ${arg}`);
}

const SECONDS = positiveInt('seconds', 20);
const SEED_TEXT = option('seed') ?? String(Math.floor(Math.random() * 2 ** 31));
const SEED = seedFrom(SEED_TEXT);
const CONNECTIONS = positiveInt('connections', 12);
const SETTINGS: ClusterSettings = {
  nodes: 2,
  childrenPerNode: 2,
  replicasPerNode: 2,
  requestTimeoutMs: 5000,
  heartbeatMs: 300,
  leaseMs: 1500,
  workerHeartbeatIntervalMs: 500,
  workerHeartbeatTimeoutMs: 2000,
  logLevel: option('log-level') ?? 'warn',
};
/** A request with no answer by then is hung: three times the engine's own deadline. */
const CUTOFF_MS = SETTINGS.requestTimeoutMs * 3;
/** After a fault ends, every node must show the expected owners within this. */
const CONVERGENCE_BOUND_MS = 5000;
/** How long the harness keeps polling past the bound, to report how late a slow convergence was. */
const CONVERGENCE_LIMIT_MS = CONVERGENCE_BOUND_MS * 2;
const STARTUP_LIMIT_MS = 30_000;
/** A fault must end at least this long before the load's planned end. */
const FAULT_END_MARGIN_MS = 1000;
const MIN_SUCCESS_RATIO = 0.99;

// ------------------------------------------------------------------------------------------- records

const started = performance.now();
const now = (): number => Math.round((performance.now() - started) * 10) / 10;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const resultsDir = join(ROOT, '.chaos-results');
const resultsPath = join(resultsDir, `${stamp}.jsonl`);
await mkdir(resultsDir, { recursive: true });
const out = createWriteStream(resultsPath);
const write = (line: object): void => {
  out.write(`${JSON.stringify(line)}\n`);
};

const requests: RequestRecord[] = [];
const replicaEvents: ReplicaEvent[] = [];
const convergence: ConvergenceRecord[] = [];
const log = (text: string): void => console.log(`[${(now() / 1000).toFixed(1).padStart(6)} s] ${text}`);

function replicaEvent(replica: Replica, up: boolean): void {
  const event: ReplicaEvent = { type: 'replica', at: now(), replica: replica.name, up };
  replicaEvents.push(event);
  write(event);
}

// ------------------------------------------------------------------------------------------- faults

function expectedReplicas(cluster: ChaosCluster): ExpectedReplica[] {
  return cluster.replicas
    .filter((r) => r.alive && r.pid !== undefined)
    .map((r) => ({ name: r.name, pid: r.pid as number, nodeId: `node-${r.node.name}` }));
}

/** Applies one fault and ends it; returns a description of what was done. */
async function applyFault(cluster: ChaosCluster, fault: PlannedFault): Promise<string> {
  const node = cluster.nodes[fault.node];
  if (node === undefined) throw new Error(`fault ${fault.index}: no node ${fault.node}`);
  switch (fault.kind) {
    case 'kill-worker': {
      const replica = cluster.replicas[fault.node * SETTINGS.replicasPerNode + fault.member] as Replica;
      const pid = replica.pid;
      replicaEvent(replica, false);
      await replica.kill();
      await sleep(fault.holdMs);
      await replica.start();
      replicaEvent(replica, true);
      return `SIGKILL worker ${replica.name} (pid ${pid}), restarted after ${fault.holdMs} ms as pid ${replica.pid}`;
    }
    case 'stop-worker': {
      const replica = cluster.replicas[fault.node * SETTINGS.replicasPerNode + fault.member] as Replica;
      replicaEvent(replica, false);
      replica.signal('SIGSTOP');
      replica.stopped = true;
      await sleep(fault.holdMs);
      replica.signal('SIGCONT');
      replica.stopped = false;
      replicaEvent(replica, true);
      return `SIGSTOP worker ${replica.name} (pid ${replica.pid}) for ${fault.holdMs} ms, then SIGCONT`;
    }
    case 'kill-child': {
      const pid = await childPidAt(node, fault.member);
      if (pid === undefined) return `kill-child: node ${node.name} has no child ${fault.member} (skipped)`;
      process.kill(pid, 'SIGKILL');
      await awaitGone(pid);
      return `SIGKILL engine child ${fault.member} of node ${node.name} (pid ${pid}); its primary respawns it`;
    }
    case 'restart-redis': {
      await cluster.redis.kill();
      await sleep(fault.holdMs);
      await cluster.redis.restart();
      return `SIGKILL redis-server, restarted empty after ${fault.holdMs} ms`;
    }
  }
}

async function converge(cluster: ChaosCluster, fault: ConvergenceRecord['fault'], kind: string, limitMs: number): Promise<ConvergenceRecord> {
  const result = await awaitConvergence(cluster.nodes, SETTINGS.childrenPerNode, () => expectedReplicas(cluster), limitMs);
  const record: ConvergenceRecord = {
    type: 'convergence',
    fault,
    kind,
    ms: result.ms,
    ...(result.lastProblem === undefined ? {} : { lastProblem: result.lastProblem }),
    trail: result.trail,
  };
  convergence.push(record);
  write({ ...record, at: now() });
  return record;
}

// ------------------------------------------------------------------------------------------- the run

function printReport(report: ChaosReport): void {
  console.log('');
  console.log(`requests: ${report.total} total, ${report.ok} ok, ${report.failed} failed, ${report.hung} hung, ${report.crossed} crossed`);
  const kinds = Object.entries(report.failuresByKind).sort((a, b) => b[1] - a[1]);
  for (const [kind, count] of kinds) console.log(`  failed: ${String(count).padStart(6)}  ${kind}`);
  const windows = report.allDown.length === 0 ? 'none' : report.allDown.map((w) => `${w.from}–${w.to} ms`).join(', ');
  console.log(`every replica down: ${windows}; success over the ${report.eligible} requests issued with a replica up: ${formatPercent(report.successRatio)} (≥ ${formatPercent(MIN_SUCCESS_RATIO)} required)`);
  for (const c of convergence) {
    const ms = c.ms === null ? `not within ${CONVERGENCE_LIMIT_MS} ms (${c.lastProblem ?? '?'})` : `${c.ms} ms`;
    console.log(`  converged after ${typeof c.fault === 'number' ? `fault ${c.fault} (${c.kind})` : c.fault}: ${ms}`);
  }
  console.log(`convergence bound ${CONVERGENCE_BOUND_MS} ms after each fault ends; worst ${report.convergedWorstMs ?? 'n/a'} ms`);
  for (const problem of report.problems) console.log(`FAILED: ${problem}`);
  console.log(`results: ${resultsPath}`);
  console.log(summaryLine(report));
}

async function saveLogs(cluster: ChaosCluster): Promise<void> {
  for (const node of cluster.nodes) {
    const lines = [...node.engine.stdout.lines, ...node.engine.stderr.lines];
    await writeFile(join(resultsDir, `${stamp}-node-${node.name}.log`), `${lines.join('\n')}\n`);
  }
  const workerLines = cluster.replicas.flatMap((r) => (r.process?.stderr.lines ?? []).map((line) => `${r.name}: ${line}`));
  if (workerLines.length > 0) await writeFile(join(resultsDir, `${stamp}-workers.log`), `${workerLines.join('\n')}\n`);
}

async function main(): Promise<number> {
  const topology = { nodes: SETTINGS.nodes, childrenPerNode: SETTINGS.childrenPerNode, replicasPerNode: SETTINGS.replicasPerNode };
  const schedule = generateSchedule(SEED, SECONDS, topology);
  write({ type: 'meta', seed: SEED_TEXT, seconds: SECONDS, connections: CONNECTIONS, cutoffMs: CUTOFF_MS, convergenceBoundMs: CONVERGENCE_BOUND_MS, settings: SETTINGS, schedule });
  console.log(
    `chaos: seed ${SEED_TEXT}, ${SECONDS} s of load, ${SETTINGS.nodes} nodes × ${SETTINGS.childrenPerNode} processes (Redis mode), ` +
      `${SETTINGS.nodes * SETTINGS.replicasPerNode} replicas, ${CONNECTIONS} connections, ${schedule.length} faults planned`,
  );

  const cluster = await startCluster(SETTINGS);
  try {
    log(`cluster up: nodes ${cluster.nodes.map((n) => `${n.name} (http ${n.engine.ports.http}, pid ${n.engine.child.pid})`).join(', ')}, redis ${cluster.redis.port}`);
    const initial = await converge(cluster, 'initial', 'startup', STARTUP_LIMIT_MS);
    if (initial.ms === null) throw new Error(`the cluster never showed every replica: ${initial.lastProblem ?? '?'}`);
    log(`every replica registered on every node (${initial.ms} ms)`);

    const load = new LoadGenerator({
      targets: cluster.nodes.map((n) => ({ node: n.name, url: n.engine.httpUrl })),
      connections: CONNECTIONS,
      cutoffMs: CUTOFF_MS,
      now,
      onRecord: (record) => {
        requests.push(record);
        write(record);
      },
    });
    const loadStarted = now();
    const loadEnds = loadStarted + SECONDS * 1000;
    load.start();
    log('load started');

    // A fault starts only if it ends before the load does; the load keeps running until the last
    // fault's convergence is measured, so a run may last a little longer than --seconds.
    for (const fault of schedule) {
      if (now() + fault.gapMs + fault.holdMs + FAULT_END_MARGIN_MS > loadEnds) break;
      await sleep(fault.gapMs);
      const faultStarted = now();
      const what = await applyFault(cluster, fault);
      const faultEnded = now();
      write({ type: 'fault', index: fault.index, kind: fault.kind, node: fault.node, member: fault.member, start: faultStarted, end: faultEnded, what });
      log(`fault ${fault.index}: ${what}`);
      const result = await converge(cluster, fault.index, fault.kind, CONVERGENCE_LIMIT_MS);
      log(`fault ${fault.index}: ${result.ms === null ? `NOT converged: ${result.lastProblem ?? '?'}` : `converged in ${result.ms} ms`}`);
    }
    const left = loadEnds - now();
    if (left > 0) await sleep(left);
    log(`stopping load (${load.inFlight} in flight)`);
    await load.stop();
    const final = await converge(cluster, 'final', 'end of run', CONVERGENCE_BOUND_MS);
    if (final.ms === null) log(`final state NOT converged: ${final.lastProblem ?? '?'}`);
  } finally {
    await saveLogs(cluster).catch((err: unknown) => console.error('could not save engine logs:', err));
    await cluster.close();
    log('cluster stopped');
  }

  const report = check({
    requests,
    replicaEvents,
    replicas: cluster.replicas.map((r) => r.name),
    convergence,
    convergenceBoundMs: CONVERGENCE_BOUND_MS,
    minSuccessRatio: MIN_SUCCESS_RATIO,
  });
  write({ type: 'summary', ...report });
  await new Promise<void>((resolve) => out.end(resolve));
  printReport(report);
  return report.passed ? 0 : 1;
}

// Ctrl-C: exit through process.exit so test/support's exit hooks kill every process started.
process.on('SIGINT', () => process.exit(130));
process.on('SIGTERM', () => process.exit(143));

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error('chaos: harness error:', err);
    out.end();
    process.exit(2);
  },
);
