import type { DeadLetter, LaneSettings, LaneStats, QueueJob } from './queue-job.js';
import { backoffDelayMs } from './queue-job.js';

/**
 * The embedded store's data, as plain synchronous logic over maps (no I/O, no timers: the clock is
 * passed in). The primary holds the one instance; embedded-store.ts journals every change to disk.
 *
 * Each lane keeps its messages in groups: a FIFO lane groups by the message group, a standard lane
 * puts every message in a group of its own. A group's head is handed out when the group is *ready*
 * (not leased, not waiting out a retry delay); the rest of the group waits behind it, so order within
 * a group holds while different groups run in parallel.
 */
interface Lease {
  group: string;
  until: number;
}

class Lane {
  readonly groups = new Map<string, QueueJob[]>();
  /** Groups whose head may be handed out, in the order they became ready. */
  readonly ready: string[] = [];
  readyHead = 0;
  /** Groups waiting out a retry delay: group → time it becomes ready. */
  readonly delayed = new Map<string, number>();
  readonly leases = new Map<string, Lease>();
  /** Ids of the messages held (not the dead letters): an id enqueued twice is kept once. */
  readonly ids = new Set<string>();
  deadLetters: DeadLetter[] = [];
  retried = 0;
  deadLettered = 0;
  size = 0;

  pushReady(group: string): void {
    this.ready.push(group);
  }

  popReady(): string | undefined {
    if (this.readyHead >= this.ready.length) return undefined;
    const group = this.ready[this.readyHead];
    this.readyHead++;
    if (this.readyHead > 1024 && this.readyHead * 2 > this.ready.length) {
      this.ready.splice(0, this.readyHead);
      this.readyHead = 0;
    }
    return group;
  }

  get empty(): boolean {
    return this.size === 0 && this.deadLetters.length === 0;
  }
}

/** One change to what is stored, for a journal: replaying them in order rebuilds the state. */
export type StateRecord =
  | { op: 'put'; job: QueueJob }
  | { op: 'del'; lane: string; id: string }
  | { op: 'dead'; lane: string; letter: DeadLetter }
  | { op: 'undead'; lane: string; id: string }
  | { op: 'count'; lane: string; retried: number; deadLettered: number };

export class QueueState {
  private readonly lanes = new Map<string, Lane>();

  constructor(
    private readonly now: () => number = Date.now,
    private record: (change: StateRecord) => void = () => undefined,
  ) {}

  private lane(name: string): Lane {
    let lane = this.lanes.get(name);
    if (lane === undefined) {
      lane = new Lane();
      this.lanes.set(name, lane);
    }
    return lane;
  }

  private static groupOf(job: QueueJob): string {
    return job.group === undefined ? `#${job.id}` : `=${job.group}`;
  }

  has(lane: string, id: string): boolean {
    return this.lanes.get(lane)?.ids.has(id) ?? false;
  }

  /** Adds a message; false when the lane holds one with this id already. */
  enqueue(job: QueueJob): boolean {
    const lane = this.lane(job.lane);
    if (lane.ids.has(job.id)) return false;
    lane.ids.add(job.id);
    const group = QueueState.groupOf(job);
    const jobs = lane.groups.get(group);
    if (jobs === undefined) {
      lane.groups.set(group, [job]);
      lane.pushReady(group);
    } else jobs.push(job);
    lane.size++;
    this.record({ op: 'put', job });
    return true;
  }

  claim(settings: LaneSettings, max: number, leaseMs: number): QueueJob[] {
    const lane = this.lanes.get(settings.lane);
    if (lane === undefined) return [];
    const now = this.now();
    this.expire(settings.lane, lane, now);
    for (const [group, until] of lane.delayed) {
      if (until > now) continue;
      lane.delayed.delete(group);
      lane.pushReady(group);
    }
    const out: QueueJob[] = [];
    while (out.length < max && lane.leases.size < settings.concurrency) {
      const group = lane.popReady();
      if (group === undefined) break;
      const head = lane.groups.get(group)?.[0];
      if (head === undefined) continue;
      lane.leases.set(head.id, { group, until: now + leaseMs });
      out.push(head);
    }
    return out;
  }

  /** Leases past their time: their holder stopped; each counts a failed attempt. */
  private expire(name: string, lane: Lane, now: number): void {
    for (const [id, lease] of lane.leases) {
      if (lease.until <= now) this.fail(name, id, 'lease expired: the process running it stopped or stalled');
    }
  }

  ack(laneName: string, id: string): boolean {
    const lane = this.lanes.get(laneName);
    const lease = lane?.leases.get(id);
    if (lane === undefined || lease === undefined) return false;
    lane.leases.delete(id);
    this.removeHead(lane, lease.group);
    this.record({ op: 'del', lane: laneName, id });
    return true;
  }

  fail(laneName: string, id: string, error: string): 'retry' | 'dead' | 'lost' {
    const lane = this.lanes.get(laneName);
    const lease = lane?.leases.get(id);
    if (lane === undefined || lease === undefined) return 'lost';
    lane.leases.delete(id);
    const job = lane.groups.get(lease.group)?.[0];
    if (job === undefined) return 'lost';
    job.attemptsMade++;
    if (job.attemptsMade >= job.maxAttempts) {
      this.removeHead(lane, lease.group);
      const letter = { job, error, failedAt: this.now() };
      lane.deadLetters.unshift(letter);
      lane.deadLettered++;
      this.record({ op: 'del', lane: laneName, id });
      this.record({ op: 'dead', lane: laneName, letter });
      this.recordCounters(laneName, lane);
      return 'dead';
    }
    lane.delayed.set(lease.group, this.now() + backoffDelayMs(job.backoffMs, job.attemptsMade));
    lane.retried++;
    this.record({ op: 'put', job });
    this.recordCounters(laneName, lane);
    return 'retry';
  }

  private recordCounters(laneName: string, lane: Lane): void {
    this.record({ op: 'count', lane: laneName, retried: lane.retried, deadLettered: lane.deadLettered });
  }

  private removeHead(lane: Lane, group: string): void {
    const jobs = lane.groups.get(group);
    if (jobs === undefined) return;
    const head = jobs.shift();
    if (head !== undefined) lane.ids.delete(head.id);
    lane.size--;
    if (jobs.length === 0) lane.groups.delete(group);
    else lane.pushReady(group);
  }

  renew(laneName: string, ids: readonly string[], leaseMs: number): void {
    const lane = this.lanes.get(laneName);
    if (lane === undefined) return;
    const until = this.now() + leaseMs;
    for (const id of ids) {
      const lease = lane.leases.get(id);
      if (lease !== undefined) lease.until = until;
    }
  }

  deadLetters(laneName: string, offset: number, limit: number): DeadLetter[] {
    return (this.lanes.get(laneName)?.deadLetters ?? []).slice(offset, offset + limit);
  }

  redrive(laneName: string): number {
    const lane = this.lanes.get(laneName);
    if (lane === undefined) return 0;
    const letters = lane.deadLetters;
    lane.deadLetters = [];
    for (const letter of letters) this.record({ op: 'undead', lane: laneName, id: letter.job.id });
    // Oldest first, so a group's redriven messages keep their order.
    for (let i = letters.length - 1; i >= 0; i--) {
      const letter = letters[i];
      if (letter !== undefined) this.enqueue({ ...letter.job, attemptsMade: 0 });
    }
    return letters.length;
  }

  redriveOne(laneName: string, id: string): boolean {
    const letter = this.takeDeadLetter(laneName, id);
    if (letter === undefined) return false;
    this.enqueue({ ...letter.job, attemptsMade: 0 });
    return true;
  }

  discard(laneName: string, id: string): boolean {
    return this.takeDeadLetter(laneName, id) !== undefined;
  }

  private takeDeadLetter(laneName: string, id: string): DeadLetter | undefined {
    const lane = this.lanes.get(laneName);
    if (lane === undefined) return undefined;
    const index = lane.deadLetters.findIndex((letter) => letter.job.id === id);
    if (index < 0) return undefined;
    const [letter] = lane.deadLetters.splice(index, 1);
    this.record({ op: 'undead', lane: laneName, id });
    return letter;
  }

  stats(laneName: string): LaneStats {
    const lane = this.lanes.get(laneName);
    if (lane === undefined) return { depth: 0, inFlight: 0, deadLetters: 0, retried: 0, deadLettered: 0 };
    return { depth: lane.size, inFlight: lane.leases.size, deadLetters: lane.deadLetters.length, retried: lane.retried, deadLettered: lane.deadLettered };
  }

  laneNames(): string[] {
    return [...this.lanes].filter(([, lane]) => !lane.empty).map(([name]) => name);
  }

  /** Everything stored, as records that `replay` turns back into this state (the journal's compaction). */
  *records(): Generator<StateRecord> {
    for (const [name, lane] of this.lanes) {
      for (const group of lane.groups.values()) for (const job of group) yield { op: 'put', job };
      for (let i = lane.deadLetters.length - 1; i >= 0; i--) {
        const letter = lane.deadLetters[i];
        if (letter !== undefined) yield { op: 'dead', lane: name, letter };
      }
      if (lane.retried > 0 || lane.deadLettered > 0) yield { op: 'count', lane: name, retried: lane.retried, deadLettered: lane.deadLettered };
    }
  }

  /**
   * Rebuilds state from journal records (into an empty instance). A job keeps the place of its first
   * `put` in its lane, so groups come back in their order; leases and retry delays are not journaled:
   * after a restart every message is ready at once, and a message that was running runs again.
   */
  static replay(records: Iterable<StateRecord>, now: () => number = Date.now, record?: (change: StateRecord) => void): QueueState {
    const jobs = new Map<string, Map<string, QueueJob>>();
    const dead = new Map<string, Map<string, DeadLetter>>();
    const counters = new Map<string, { retried: number; deadLettered: number }>();
    const laneOf = <T>(map: Map<string, Map<string, T>>, lane: string): Map<string, T> => {
      let held = map.get(lane);
      if (held === undefined) {
        held = new Map();
        map.set(lane, held);
      }
      return held;
    };
    for (const change of records) {
      switch (change.op) {
        case 'put':
          laneOf(jobs, change.job.lane).set(change.job.id, change.job);
          break;
        case 'del':
          jobs.get(change.lane)?.delete(change.id);
          break;
        case 'dead':
          laneOf(dead, change.lane).set(change.letter.job.id, change.letter);
          break;
        case 'undead':
          dead.get(change.lane)?.delete(change.id);
          break;
        case 'count':
          counters.set(change.lane, { retried: change.retried, deadLettered: change.deadLettered });
          break;
      }
    }
    const state = new QueueState(now);
    for (const lane of jobs.values()) for (const job of lane.values()) state.enqueue(job);
    for (const [name, letters] of dead) state.lane(name).deadLetters = [...letters.values()].reverse();
    for (const [name, count] of counters) {
      const lane = state.lane(name);
      lane.retried = count.retried;
      lane.deadLettered = count.deadLettered;
    }
    if (record !== undefined) state.record = record;
    return state;
  }
}
