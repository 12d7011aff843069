import { Cron } from 'croner';

/**
 * iii's cron syntax (its engine parses with the Rust `cron` crate 0.15): 6 fields
 * (`sec min hour day-of-month month day-of-week`) or 7 (with `year`), in UTC; day of week 1-7 with
 * 1 = Sunday (the crate's numbering, not Vixie cron's 0 = Sunday), names (`Mon`, `Jan`) accepted;
 * day of month and day of week must both match; `@yearly`, `@monthly`, `@weekly`, `@daily`,
 * `@hourly` shorthands. Parsed by croner (docs/cron.md says why).
 */

const SHORTHANDS: Readonly<Record<string, string>> = {
  '@yearly': '0 0 0 1 1 *',
  '@annually': '0 0 0 1 1 *',
  '@monthly': '0 0 0 1 * *',
  '@weekly': '0 0 0 * * 1',
  '@daily': '0 0 0 * * *',
  '@midnight': '0 0 0 * * *',
  '@hourly': '0 0 * * * *',
};

export interface CronSchedule {
  /** The first fire time strictly after `after`, or undefined when there is none (a year in the past). */
  next(after: Date): Date | undefined;
}

/** A schedule, or the reason the expression is refused (iii's message shape). */
export function parseCronExpression(expression: string): CronSchedule | { error: string } {
  const trimmed = expression.trim();
  const pattern = SHORTHANDS[trimmed.toLowerCase()] ?? trimmed;
  try {
    const cron = new Cron(pattern, { timezone: 'UTC', mode: '6-or-7-parts', alternativeWeekdays: true, domAndDow: true, paused: true });
    return { next: (after) => cron.nextRun(after) ?? undefined };
  } catch (err) {
    return { error: `Invalid cron expression '${expression}': ${err instanceof Error ? err.message : String(err)}` };
  }
}

/** chrono's `to_rfc3339` as iii sends it: `+00:00`, fractional seconds only when there are some. */
export function rfc3339(date: Date): string {
  const iso = date.toISOString();
  return (date.getUTCMilliseconds() === 0 ? iso.replace('.000Z', 'Z') : iso).replace(/Z$/, '+00:00');
}
