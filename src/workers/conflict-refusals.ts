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
 * (route-table.ts, docs/security.md#route-ownership). A conflict must still hold CONFLICT_SETTLE_MS
 * after it was first seen: the table is eventually consistent, so a registration that looks like a
 * conflict only because a peer's newer snapshot (the holder left, or reconnected elsewhere) has not
 * arrived yet is not refused. Meanwhile the conflicting binding is not routed. A conflict with a
 * registration this process holds itself cannot be stale: it is refused at once, as iii refuses a
 * conflicting route when it is registered (docs/http.md#route-conflicts).
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
  ) {}

  /** After each table rebuild: starts the settle time of every new conflict of this process. */
  seen(state: RoutingState): void {
    for (const conflict of state.conflicts) {
      if (conflict.ownerId !== this.ownerId) continue;
      const key = keyOf(conflict);
      if (conflict.holderOwnerId === this.ownerId) {
        const pending = this.pending.get(key);
        if (pending !== undefined) clearTimeout(pending);
        this.pending.delete(key);
        this.refuse(conflict);
        continue;
      }
      if (this.pending.has(key)) continue;
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
