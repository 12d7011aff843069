import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { KvDump, MemoryKvStore } from './memory-kv-store.js';
import { isPlainObject } from '../../values.js';

/** The file inside iii's `file_path` directory that holds the store. */
export const KV_FILE_NAME = 'switchyard-kv.json';

/**
 * `file_based` persistence of a MemoryKvStore (docs/modules.md#where-data-lives): loaded once when
 * started, written every `saveIntervalMs` when something changed and once more on close. A write
 * goes to a temporary file renamed into place, so a crash mid-write leaves the previous copy.
 */
export class KvFile {
  private readonly path: string;
  private dirty = false;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly store: MemoryKvStore,
    private readonly directory: string,
    private readonly saveIntervalMs: number,
    private readonly logger: Logger,
  ) {
    this.path = join(directory, KV_FILE_NAME);
  }

  /** Loads the file (a missing file is an empty store), then saves on change. Throws when unreadable. */
  start(): void {
    mkdirSync(this.directory, { recursive: true });
    let text: string | undefined;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (text !== undefined) {
      const parsed: unknown = JSON.parse(text);
      if (!isPlainObject(parsed)) throw new Error(`${this.path} does not hold a store (expected a JSON object)`);
      this.store.restore(parsed as KvDump);
      this.logger.info({ file: this.path }, 'kv store loaded from file');
    }
    this.store.onWrite = () => {
      this.dirty = true;
    };
    this.timer = setInterval(() => this.save(), this.saveIntervalMs);
    this.timer.unref();
  }

  /** Writes the store if it changed since the last save. */
  save(): void {
    if (!this.dirty) return;
    this.dirty = false;
    const temporary = `${this.path}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      writeFileSync(temporary, JSON.stringify(this.store.dump()));
      renameSync(temporary, this.path);
    } catch (err) {
      this.dirty = true;
      this.logger.error({ err, file: this.path }, 'kv store could not be saved; retrying at the next interval');
    }
  }

  /** The last save, then no more. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    this.save();
    this.store.onWrite = undefined;
  }
}
