import type { RegistrationConflict, RoutingState } from '../routing/route-table.js';

/** How long a registration conflict must persist before the registration is refused. */
export const CONFLICT_SETTLE_MS = 1000;

/** The connection a conflict's registration belongs to, as far as refusing it needs. */
export interface ConflictHolder {
  dropConflictingTrigger(triggerId: string, reason: string): void;
  dropConflictingFunction(functionId: string, reason: string): void;
}

/**
 * Drops this process's registrations that lost to an older holder, telling their workers
 * (route-ownership.ts, docs/security.md#route-ownership), as iii refuses a conflicting route when it is
 * registered (docs/http.md#route-conflicts). A conflict is refused at once when it is visible here:
 * this process holds the registration it lost to, or holds the snapshot of the owner that does and
 * that snapshot did not change in the build that found the conflict (every process holds the whole
 * table, so a registration arriving after the holder's is measured against it). Otherwise the
 * conflict is a race (the holder's registration arrived with, or after, the one it beats) and must
 * still hold CONFLICT_SETTLE_MS after it was first seen: the table is eventually consistent, so a
 * registration that looks like a conflict only because a peer's newer snapshot has not arrived yet
 * is not refused. Meanwhile the conflicting binding is not routed.
 *
 * One visible case is checked once more first: a holder of the registration's own principal on
 * another process may be a worker that is leaving (its principal may take the route back, e.g. a
 * reconnect), and its departure may still be on its way here. With a freshness barrier (a cluster
 * child, cluster/freshness.ts) such a conflict is refused once this process holds every sibling's
 * current snapshot and the conflict still stands: a round trip, not the settle time. Without one (a
 * holder on another node), it waits out the settle time like a race.
 */
export class ConflictRefusals {
  /** Conflicts seen and waiting out the settle time, by kind, worker and id. */
  private readonly pending = new Map<string, NodeJS.Timeout>();

  constructor(
    private readonly ownerId: string,
    /** The table as it is now (rebuilt if changed). */
    private readonly current: () => RoutingState,
    private readonly holder: (workerId: string) => ConflictHolder | undefined,
    private readonly onRefused: (kind: RegistrationConflict['kind']) => void,
    /** The siblings' freshness barrier (cluster children only). */
    private readonly freshness?: { pass(): Promise<void> },
  ) {}

  /** After each table rebuild: refuses every visible conflict of this process, starts the settle time of a race. */
  seen(state: RoutingState): void {
    for (const conflict of state.conflicts) {
      if (conflict.ownerId !== this.ownerId) continue;
      const key = keyOf(conflict);
      const local = conflict.holderOwnerId === this.ownerId;
      // A race already waiting out its settle time is decided by it (a later build changes nothing).
      if (!local && this.pending.has(key)) continue;
      const visible = local || !state.changedOwners.has(conflict.holderOwnerId);
      if (visible && !local && conflict.samePrincipal && this.freshness !== undefined) {
        // Refused once the table holds every sibling's current snapshot, if it still stands.
        const timer = setTimeout(() => this.settle(key), CONFLICT_SETTLE_MS);
        timer.unref();
        this.pending.set(key, timer);
        const settleNow = (): void => {
          if (this.pending.get(key) !== timer) return;
          clearTimeout(timer);
          this.settle(key);
        };
        void this.freshness.pass().then(settleNow, settleNow);
        continue;
      }
      if (visible && !(conflict.samePrincipal && !local)) {
        const pending = this.pending.get(key);
        if (pending !== undefined) clearTimeout(pending);
        this.pending.delete(key);
        this.refuse(conflict);
        continue;
      }
      const timer = setTimeout(() => this.settle(key), CONFLICT_SETTLE_MS);
      timer.unref();
      this.pending.set(key, timer);
    }
  }

  private settle(key: string): void {
    this.pending.delete(key);
    const still = this.current().conflicts.find((conflict) => conflict.ownerId === this.ownerId && keyOf(conflict) === key);
    if (still !== undefined) this.refuse(still);
  }

  private refuse(conflict: RegistrationConflict): void {
    const connection = this.holder(conflict.workerId);
    if (connection === undefined) return;
    this.onRefused(conflict.kind);
    if (conflict.kind === 'route') connection.dropConflictingTrigger(conflict.id, conflict.reason);
    else connection.dropConflictingFunction(conflict.id, conflict.reason);
  }

  close(): void {
    for (const timer of this.pending.values()) clearTimeout(timer);
    this.pending.clear();
  }
}

const keyOf = (conflict: RegistrationConflict): string => `${conflict.kind} ${conflict.workerId} ${conflict.id}`;
