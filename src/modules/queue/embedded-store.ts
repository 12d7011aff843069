import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { LeaseStore } from './lease-store.js';
import type { DeadLetterView, LaneSettings, LaneStats, QueueJob } from './queue-job.js';
import { deadLetterView } from './queue-job.js';
import type { StateRecord } from './queue-state.js';
import { QueueState } from './queue-state.js';

const JOURNAL_FILE = 'queue.journal';
/** Rewrite the journal when it holds this many more records than the live state needs. */
const COMPACT_SLACK = 50_000;

/**
 * The embedded queue store: one instance, held by the primary (children reach it over cluster IPC,
 * embedded-store-link.ts). With a directory it journals every change before answering, as one JSON
 * line per change appended to `queue.journal` (a `write(2)` each: the data is in the kernel before
 * the enqueuer hears back, so a killed engine loses nothing); on open it replays the journal and
 * rewrites it compacted. Without a directory it is memory only (`store_method: in_memory`).
 */
export class EmbeddedQueueStore implements LeaseStore {
  private state: QueueState;
  private fd: number | undefined;
  private written = 0;
  private closed = false;

  private constructor(
    private readonly dir: string | undefined,
    private readonly logger: Logger,
  ) {
    this.state = new QueueState();
  }

  /** Opens (and replays) the store; `dir` unset: memory only. */
  static open(dir: string | undefined, logger: Logger): EmbeddedQueueStore {
    const store = new EmbeddedQueueStore(dir, logger);
    if (dir !== undefined) store.load(dir);
    return store;
  }

  private load(dir: string): void {
    mkdirSync(dir, { recursive: true });
    const path = join(dir, JOURNAL_FILE);
    const records: StateRecord[] = [];
    if (existsSync(path)) {
      const lines = readFileSync(path, 'utf8').split('\n');
      let torn = 0;
      for (const line of lines) {
        if (line === '') continue;
        try {
          records.push(JSON.parse(line) as StateRecord);
        } catch {
          // Only the last line can be torn (the engine was killed mid-write); it was never answered.
          torn++;
        }
      }
      if (torn > 0) this.logger.warn({ torn }, 'queue journal had unreadable lines; skipped');
    }
    this.state = QueueState.replay(records, Date.now, (change) => this.append(change));
    this.compact(dir);
    const lanes = this.state.laneNames();
    this.logger.info({ dir, lanes: lanes.length, messages: lanes.reduce((n, lane) => n + this.state.stats(lane).depth, 0) }, 'queue store loaded');
  }

  /** Writes the live state to a new journal and swaps it in (rename is atomic). */
  private compact(dir: string): void {
    const path = join(dir, JOURNAL_FILE);
    const temporary = `${path}.tmp`;
    const fd = openSync(temporary, 'w');
    let count = 0;
    let chunk = '';
    for (const record of this.state.records()) {
      chunk += `${JSON.stringify(record)}\n`;
      count++;
      if (chunk.length > 1 << 20) {
        writeSync(fd, chunk);
        chunk = '';
      }
    }
    if (chunk !== '') writeSync(fd, chunk);
    fsyncSync(fd);
    closeSync(fd);
    renameSync(temporary, path);
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = openSync(path, 'a');
    this.written = count;
  }

  private append(change: StateRecord): void {
    if (this.fd === undefined) return;
    writeSync(this.fd, `${JSON.stringify(change)}\n`);
    this.written++;
  }

  private maybeCompact(): void {
    if (this.dir === undefined || this.written < COMPACT_SLACK) return;
    let live = 0;
    for (const lane of this.state.laneNames()) {
      const stats = this.state.stats(lane);
      live += stats.depth + stats.deadLetters + 1;
    }
    if (this.written > live * 4 + COMPACT_SLACK) this.compact(this.dir);
  }

  // The LeaseStore surface: synchronous underneath (one owner), promises for the shared interface.

  enqueue(job: QueueJob): Promise<void> {
    this.check();
    this.state.enqueue(job);
    this.maybeCompact();
    return Promise.resolve();
  }

  claim(lane: LaneSettings, max: number, leaseMs: number): Promise<QueueJob[]> {
    this.check();
    return Promise.resolve(this.state.claim(lane, max, leaseMs));
  }

  ack(lane: string, id: string): Promise<boolean> {
    this.check();
    return Promise.resolve(this.state.ack(lane, id));
  }

  fail(lane: string, id: string, error: string): Promise<'retry' | 'dead' | 'lost'> {
    this.check();
    return Promise.resolve(this.state.fail(lane, id, error));
  }

  renew(lane: string, ids: readonly string[], leaseMs: number): Promise<void> {
    this.state.renew(lane, ids, leaseMs);
    return Promise.resolve();
  }

  deadLetters(lane: string, offset: number, limit: number): Promise<DeadLetterView[]> {
    return Promise.resolve(this.state.deadLetters(lane, offset, limit).map(deadLetterView));
  }

  redrive(lane: string): Promise<number> {
    this.check();
    return Promise.resolve(this.state.redrive(lane));
  }

  redriveOne(lane: string, id: string): Promise<boolean> {
    this.check();
    return Promise.resolve(this.state.redriveOne(lane, id));
  }

  discard(lane: string, id: string): Promise<boolean> {
    this.check();
    return Promise.resolve(this.state.discard(lane, id));
  }

  stats(lane: string): Promise<LaneStats> {
    return Promise.resolve(this.state.stats(lane));
  }

  lanes(): Promise<string[]> {
    return Promise.resolve(this.state.laneNames());
  }

  private check(): void {
    if (this.closed) throw new Error('queue store is closed');
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      if (this.fd !== undefined) {
        try {
          fsyncSync(this.fd);
        } finally {
          closeSync(this.fd);
          this.fd = undefined;
        }
      }
    }
    return Promise.resolve();
  }
}
