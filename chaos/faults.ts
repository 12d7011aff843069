/**
 * The fault schedule: a pure function of the seed, the run length and the topology, so a failing run
 * can be replayed with `--seed`. The runner applies the faults one at a time in this order; the wall
 * clock times it records depend on how fast the cluster converges after each one.
 */

export type FaultKind = 'kill-worker' | 'stop-worker' | 'kill-child' | 'restart-redis';

export const FAULT_KINDS: readonly FaultKind[] = ['kill-worker', 'stop-worker', 'kill-child', 'restart-redis'];

export interface Topology {
  nodes: number;
  childrenPerNode: number;
  replicasPerNode: number;
}

export interface PlannedFault {
  index: number;
  kind: FaultKind;
  /** Quiet time before the fault, counted from the previous fault's convergence. */
  gapMs: number;
  /** How long the fault lasts: a killed worker stays dead, a stopped one stopped, Redis down. 0 for kill-child. */
  holdMs: number;
  /** Node index (0-based) of the target; unused for restart-redis. */
  node: number;
  /** Replica index within the node (worker faults) or child index (kill-child); unused for restart-redis. */
  member: number;
}

export const GAP_MS = { min: 1000, max: 2500 } as const;
/**
 * Hold times per kind. Stopped workers straddle the engine's worker heartbeat timeout the harness
 * configures (2 s): a short stop is ridden out (queued calls complete after SIGCONT), a long one gets
 * the worker dropped and reconnecting. Both stay below the request deadline (5 s).
 */
export const HOLD_MS: Record<FaultKind, { min: number; max: number }> = {
  'kill-worker': { min: 500, max: 2500 },
  'stop-worker': { min: 500, max: 4000 },
  'kill-child': { min: 0, max: 0 },
  'restart-redis': { min: 500, max: 3000 },
};
/** What the planner assumes a fault costs beyond its gap and hold (the wait for convergence). */
export const PLANNED_CONVERGENCE_MS = 1000;

/** mulberry32: a small, fast, well-distributed 32-bit PRNG; returns floats in [0, 1). */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A `--seed` value as a 32-bit number: digits are taken as a number, anything else is hashed (FNV-1a). */
export function seedFrom(text: string): number {
  if (/^\d+$/.test(text)) return Number(BigInt(text) % 4294967296n);
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

function between(random: () => number, range: { min: number; max: number }): number {
  return range.min + Math.floor(random() * (range.max - range.min + 1));
}

function shuffled<T>(random: () => number, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/**
 * Faults for a run of `seconds`: kinds come in shuffled rounds of all four, so even a short run sees
 * each kind once every four faults; targets and durations are drawn from the same generator. One
 * fault at a time takes at most one replica down, so with two or more replicas one always serves.
 */
export function generateSchedule(seed: number, seconds: number, topology: Topology): PlannedFault[] {
  if (topology.nodes < 1 || topology.childrenPerNode < 1 || topology.replicasPerNode < 1) {
    throw new Error('topology needs at least one node, one child and one replica per node');
  }
  if (topology.nodes * topology.replicasPerNode < 2) {
    throw new Error('at least two replicas are needed: a worker fault must leave one serving');
  }
  const random = prng(seed);
  const budgetMs = seconds * 1000;
  const faults: PlannedFault[] = [];
  let round: FaultKind[] = [];
  let usedMs = 0;
  for (;;) {
    if (round.length === 0) round = shuffled(random, FAULT_KINDS);
    const kind = round.shift() as FaultKind;
    const gapMs = between(random, GAP_MS);
    const holdMs = between(random, HOLD_MS[kind]);
    const node = Math.floor(random() * topology.nodes);
    const member = Math.floor(random() * (kind === 'kill-child' ? topology.childrenPerNode : topology.replicasPerNode));
    usedMs += gapMs + holdMs + PLANNED_CONVERGENCE_MS;
    if (usedMs > budgetMs) return faults;
    faults.push({ index: faults.length, kind, gapMs, holdMs, node, member });
  }
}
