import { REGISTRATION_LIMITS } from '../protocol/limits.js';

/**
 * The process-wide share of REGISTRATION_LIMITS.processBytes: every connection takes from it what its
 * registrations hold and gives it back when they go.
 */
export class RegistrationBudget {
  private used = 0;

  constructor(readonly max: number = REGISTRATION_LIMITS.processBytes) {}

  get bytes(): number {
    return this.used;
  }

  /** Takes `delta` bytes (negative gives back); false, taking nothing, when that would pass the maximum. */
  take(delta: number): boolean {
    if (delta > 0 && this.used + delta > this.max) return false;
    this.used = Math.max(0, this.used + delta);
    return true;
  }
}
