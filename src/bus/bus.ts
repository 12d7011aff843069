import type { WireSnapshot } from './wire-snapshot.js';

/**
 * How peers learn each other's registrations (docs/cluster.md#the-bus). Each peer publishes its own
 * full snapshot (version only grows); receivers keep the newest version per peer. No deltas.
 * Implementations: `IpcBus` (embedded, relayed by the primary) and `RedisBus` (distributed).
 */
export interface BusHandlers {
  /** Another peer's snapshot, newer than any delivered before for that peer. */
  snapshot(snapshot: WireSnapshot): void;
  /** A peer left (clean close), died (embedded: its process exited) or its lease expired (Redis). */
  peerGone(peerId: string): void;
}

export interface Bus {
  /**
   * Connects and loads the snapshots of every peer already present; resolves once that initial load
   * is done (the view is in sync), or rejects when the bus cannot start.
   */
  start(handlers: BusHandlers): Promise<void>;
  /** Publishes this peer's snapshot, replacing its previous one. Never throws; delivery is async. */
  publish(snapshot: WireSnapshot): void;
  /**
   * Whether the bus carries each change as a delta, so that the snapshots delivered of one peer share
   * the record objects that did not change (the Redis bus builds them from deltas; the IPC bus sends
   * and parses each whole): a receiver may then check only the records that changed
   * (SnapshotChecker), and a burst of publications costs peers what changed, so the membership slows
   * it less (membership.ts).
   */
  readonly recordsShared?: boolean;
  /** True while this peer believes its view of the cluster is complete. */
  readonly synced: boolean;
  /** Called with the code of every message the bus refuses (metrics); only the Redis bus refuses any. */
  observeRefusals?(observer: (code: string) => void): void;
  /** Called with the id of each peer found speaking an older bus protocol (Redis bus; docs/scale.md). */
  observeLegacyPeers?(observer: (peerId: string) => void): void;
  /** Announces the leave when it can, then disconnects. Idempotent. */
  close(): Promise<void>;
}
