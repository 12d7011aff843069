/** Function ids whose turn is kept at most; past it the least recently added is forgotten (starts over). */
const DEFAULT_MAX_KEYS = 10_000;
/** Turns wrap here, far below the largest safe integer. */
const TURN_WRAP = 2 ** 30;

/**
 * Round-robin over the replicas of one function, with a turn of its own per function id. One turn
 * shared by every function would spread each function unevenly: two functions called alternately,
 * each with two replicas, would send every call of the first to one replica and every call of the
 * second to the other (a middleware and its handler are exactly that pattern). The local choice
 * (workers/worker-hub.ts) and the remote one (cluster/cluster-invoker.ts) both use it.
 */
export class RoundRobin {
  private readonly turns = new Map<string, number>();

  constructor(private readonly maxKeys = DEFAULT_MAX_KEYS) {}

  /**
   * Where this call of `key` starts among `count` candidates; moves the turn on. One candidate or none
   * takes no turn (0): most functions have one worker, and a turn kept for each would hold every
   * function id ever called, up to the bound (a simulated node kept 3,000 such ids in 10 minutes).
   */
  start(key: string, count: number): number {
    if (count <= 1) return 0;
    const turn = this.turns.get(key);
    if (turn === undefined) {
      if (this.turns.size >= this.maxKeys) this.turns.delete(this.turns.keys().next().value as string);
      this.turns.set(key, 1);
      return 0;
    }
    this.turns.set(key, (turn + 1) % TURN_WRAP);
    return count > 0 ? turn % count : 0;
  }

  /**
   * The first candidate `usable` accepts, trying from `key`'s turn onwards; the one at the turn when
   * none is. A single candidate is returned without a turn.
   */
  pick<T>(key: string, candidates: readonly T[], usable: (candidate: T) => boolean = () => true): T | undefined {
    if (candidates.length <= 1) return candidates[0];
    const start = this.start(key, candidates.length);
    for (let i = 0; i < candidates.length; i++) {
      const candidate = candidates[(start + i) % candidates.length] as T;
      if (usable(candidate)) return candidate;
    }
    return candidates[start];
  }

  /** Drops `key`'s turn (its function has no replica left). */
  forget(key: string): void {
    this.turns.delete(key);
  }

  /** How many keys hold a turn (a bound check for tests). */
  get size(): number {
    return this.turns.size;
  }
}
