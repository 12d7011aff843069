import { setFlagsFromString } from 'node:v8';

/**
 * V8's heap growing factor while large streamed bodies pass through this process
 * (docs/operations.md#memory).
 *
 * An engine child runs with a low growing factor (`--heap-growing-percent=50` by default) so that its
 * RSS stays small under many mid-sized bodies. A streamed body allocates buffers outside V8's heap for
 * every piece it moves (an upload: the guarded socket read and Node's copy of each body piece; a
 * download: each WebSocket message from the worker), and at that factor V8 answers with a full
 * collection every 14–23 MiB. While at least one request's upload or streamed response has moved
 * more than `STREAM_HEAP_THRESHOLD_BYTES`, the child runs with the raised factor; when the last one
 * ends it goes back to its own. V8 reads the factor each time it recomputes its heap limits (after a
 * full collection), so a change takes effect from the next one on.
 */
export const STREAM_HEAP_THRESHOLD_BYTES = 1024 * 1024;

/** How the factor is set; V8's flag parser by default (it takes effect at V8's next limit computation). */
export type SetGrowingPercent = (percent: number) => void;

const setWithV8: SetGrowingPercent = (percent) => setFlagsFromString(`--heap-growing-percent=${percent}`);

export class StreamHeapGrowth {
  private holders = 0;
  private raisedTimes = 0;

  private constructor(
    /** The process's own factor, set back when the last stream ends. */
    readonly basePercent: number,
    readonly raisedPercent: number,
    private readonly set: SetGrowingPercent,
  ) {}

  /**
   * The control for a process started with `execArgv`, or undefined when there is nothing to do:
   * `raisedPercent` 0 (turned off), no `--heap-growing-percent` among the flags (V8 then sizes the heap
   * by its own dynamic factor, up to 4 times the live size, which is not ours to lower), or the
   * process's own factor already at or above the raised one.
   */
  static forProcess(raisedPercent: number, execArgv: readonly string[], set: SetGrowingPercent = setWithV8): StreamHeapGrowth | undefined {
    if (raisedPercent <= 0) return undefined;
    const base = growingPercentOf(execArgv);
    if (base === undefined || base <= 0 || base >= raisedPercent) return undefined;
    return new StreamHeapGrowth(base, raisedPercent, set);
  }

  /** Streams holding the raised factor now. */
  get streams(): number {
    return this.holders;
  }

  /** Times the factor was raised since start (each time the first of a run of streams passed the threshold). */
  get raises(): number {
    return this.raisedTimes;
  }

  /** One stream passed the threshold: the raised factor holds until every holder released it. */
  hold(): () => void {
    if (this.holders++ === 0) {
      this.raisedTimes++;
      this.set(this.raisedPercent);
    }
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      if (--this.holders === 0) this.set(this.basePercent);
    };
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
