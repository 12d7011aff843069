import type { Logger } from 'pino';

/**
 * Rate-limits repeated warnings of one kind (a peer of another cluster publishing every heartbeat,
 * connection errors on every retry): the first is logged at warn, later ones within the interval at
 * debug, and the next warn says how many were held back.
 */
export class WarnThrottle {
  private readonly lastWarnMs = new Map<string, number>();
  private readonly suppressed = new Map<string, number>();

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs = 10_000,
    private readonly now: () => number = () => performance.now(),
  ) {}

  warn(kind: string, fields: Record<string, unknown>, message: string): void {
    const now = this.now();
    const last = this.lastWarnMs.get(kind);
    if (last !== undefined && now - last < this.intervalMs) {
      this.suppressed.set(kind, (this.suppressed.get(kind) ?? 0) + 1);
      this.logger.debug(fields, message);
      return;
    }
    const held = this.suppressed.get(kind) ?? 0;
    this.suppressed.delete(kind);
    this.lastWarnMs.set(kind, now);
    this.logger.warn(held > 0 ? { ...fields, suppressed: held } : fields, message);
  }

  /** Forget a kind, so the next occurrence warns at once (e.g. after the connection recovered). */
  reset(kind: string): void {
    this.lastWarnMs.delete(kind);
    this.suppressed.delete(kind);
  }
}
