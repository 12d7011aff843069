import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';

/**
 * V8's heap growing factor while large streamed bodies flow through this process
 * (docs/operations.md#memory).
 *
 * An engine child runs with a low growing factor (`--heap-growing-percent=50` by default) so that its
 * RSS stays small under many mid-sized bodies. A streamed body allocates buffers outside V8's heap for
 * every piece it moves (an upload: the guarded socket read and Node's copy of each body piece; a
 * download: each WebSocket message from the worker), and at that factor V8 answers with a full
 * collection every 14–23 MiB. While at least one request's upload or streamed response moves at
 * least `STREAM_HEAP_BYTES` per `STREAM_HEAP_WINDOW_MS`, the child runs with the raised factor; when
 * the last such stream ends or slows down, it goes back to its own (a Server-Sent Events stream that
 * lasts for hours does not hold it). V8 reads the factor each time it recomputes its heap limits
 * (after a full collection), so a change takes effect from the next one on.
 */
export const STREAM_HEAP_BYTES = 1024 * 1024;
export const STREAM_HEAP_WINDOW_MS = 1000;

/** How the factor is set; V8's flag parser by default (it takes effect at V8's next limit computation). */
export type SetGrowingPercent = (percent: number) => void;

const setWithV8: SetGrowingPercent = (percent) => setFlagsFromString(`--heap-growing-percent=${percent}`);

/** One stream's bytes, as its owner counts them: `moved` for each piece, `end` once it is over. */
export class StreamTrack {
  /** Bytes in the current window: since `since` while not holding, since the last look while holding. */
  window = 0;
  since: number;
  holding = false;
  /** Raised since the last look: it gets one whole window before it can be let go. */
  fresh = false;
  private ended = false;

  constructor(private readonly owner: StreamHeapGrowth) {
    this.since = owner.now();
  }

  moved(bytes: number): void {
    if (this.holding) {
      this.window += bytes;
      return;
    }
    if (this.ended) return;
    const now = this.owner.now();
    if (now - this.since > STREAM_HEAP_WINDOW_MS) {
      this.since = now;
      this.window = 0;
    }
    this.window += bytes;
    if (this.window >= STREAM_HEAP_BYTES) this.owner.raise(this);
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.holding) this.owner.letGo(this);
  }
}

export class StreamHeapGrowth {
  private readonly holders = new Set<StreamTrack>();
  private timer: NodeJS.Timeout | undefined;
  private raisedTimes = 0;

  private constructor(
    /** The process's own factor, set back when the last stream ends or slows down. */
    readonly basePercent: number,
    readonly raisedPercent: number,
    private readonly set: SetGrowingPercent,
    /** The clock the windows are read from, in milliseconds. */
    readonly now: () => number,
  ) {}

  /**
   * The control for a process started with `execArgv`, or undefined when there is nothing to do:
   * `raisedPercent` 0 (turned off), no `--heap-growing-percent` among the flags (V8 then sizes the heap
   * by its own dynamic factor, up to 4 times the live size, which is not ours to lower), or the
   * process's own factor already at or above the raised one.
   */
  static forProcess(
    raisedPercent: number,
    execArgv: readonly string[],
    set: SetGrowingPercent = setWithV8,
    now: () => number = () => performance.now(),
  ): StreamHeapGrowth | undefined {
    if (raisedPercent <= 0) return undefined;
    const base = growingPercentOf(execArgv);
    if (base === undefined || base <= 0 || base >= raisedPercent) return undefined;
    return new StreamHeapGrowth(base, raisedPercent, set, now);
  }

  /** A new stream to count (an upload, or a streamed response). */
  track(): StreamTrack {
    return new StreamTrack(this);
  }

  /** Streams holding the raised factor now. */
  get streams(): number {
    return this.holders.size;
  }

  /** Times the factor was raised since start (each time the first of a run of streams passed the mark). */
  get raises(): number {
    return this.raisedTimes;
  }

  /** A stream moved `STREAM_HEAP_BYTES` within a window: it holds the raised factor until it ends or slows down. */
  raise(track: StreamTrack): void {
    track.holding = true;
    track.fresh = true;
    track.window = 0;
    this.holders.add(track);
    if (this.holders.size > 1) return;
    this.raisedTimes++;
    this.set(this.raisedPercent);
    this.timer = setInterval(this.look, STREAM_HEAP_WINDOW_MS);
    this.timer.unref();
  }

  /** A holding stream ended. */
  letGo(track: StreamTrack): void {
    track.holding = false;
    this.holders.delete(track);
    if (this.holders.size === 0) this.lower();
  }

  /** Each window: a stream that moved less than the mark in it (and was not just raised) lets go. */
  private readonly look = (): void => {
    for (const track of this.holders) {
      if (!track.fresh && track.window < STREAM_HEAP_BYTES) {
        track.holding = false;
        track.since = this.now();
        this.holders.delete(track);
      }
      track.fresh = false;
      track.window = 0;
    }
    if (this.holders.size === 0) this.lower();
  };

  private lower(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.set(this.basePercent);
  }
}

/** The last `--heap-growing-percent` (or V8's underscore spelling) among the flags; undefined if none. */
export function growingPercentOf(execArgv: readonly string[]): number | undefined {
  let found: number | undefined;
  for (const arg of execArgv) {
    const match = /^--heap[-_]growing[-_]percent=(\d+)$/.exec(arg);
    if (match !== null) found = Number(match[1]);
  }
  return found;
}
