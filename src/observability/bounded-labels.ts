/**
 * Label values that come from outside (the error codes of workers and callers) kept to a bounded set:
 * the first `max` distinct values are used as they are and any later new one as `other`, so a
 * misbehaving peer cannot grow a metric's series without bound.
 */
export class BoundedLabels {
  private readonly seen = new Set<string>();

  constructor(private readonly max: number) {}

  label(value: string): string {
    if (this.seen.has(value)) return value;
    if (this.seen.size >= this.max) return 'other';
    this.seen.add(value);
    return value;
  }
}
