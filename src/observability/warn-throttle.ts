import type { Logger } from 'pino';

/**
 * Rate-limits repeated warnings of one kind (a peer of another cluster publishing every heartbeat,
 * connection errors on every retry, a worker sending malformed frames): the first `burst` of a kind
 * within an interval are logged at warn, later ones at debug, and the next interval's first warning
 * says how many were held back. One log line per occurrence either way, so nothing is lost at debug.
 */
export class WarnThrottle {
  private readonly windows = new Map<string, { startedMs: number; count: number; held: number }>();

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs = 10_000,
    private readonly burst = 1,
    private readonly now: () => number = () => performance.now(),
  ) {}

  warn(kind: string, fields: Record<string, unknown>, message: string): void {
    const now = this.now();
    const window = this.windows.get(kind);
    if (window === undefined || now - window.startedMs >= this.intervalMs) {
      const held = window?.held ?? 0;
      this.windows.set(kind, { startedMs: now, count: 1, held: 0 });
      this.logger.warn(held > 0 ? { ...fields, suppressed: held } : fields, message);
      return;
    }
    if (++window.count <= this.burst) {
      this.logger.warn(fields, message);
      return;
    }
    window.held++;
    this.logger.debug(fields, message);
  }

  /** Forget a kind, so the next occurrence warns at once (e.g. after the connection recovered). */
  reset(kind: string): void {
    this.windows.delete(kind);
  }
}
