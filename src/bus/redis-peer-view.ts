import type { WireSnapshot } from './wire-snapshot.js';
import type { BusHandlers } from './bus.js';

interface HeldPeer {
  version: number;
  /** Monotonic ms of the last snapshot or heartbeat heard from this peer (or of the last reload). */
  lastHeardMs: number;
}

/** How long a peer that said `gone` stays refused (late heartbeats, a GET racing the DEL). */
const DEPARTED_MEMORY_MIN_MS = 60_000;

/**
 * What one Redis bus receiver knows of the other peers: newest version, when each was last heard,
 * and who left cleanly. Plain logic over data (time is passed in), so the rules are testable without
 * Redis; `RedisBus` feeds it messages and reload results.
 */
export class RedisPeerView {
  private readonly peers = new Map<string, HeldPeer>();
  private readonly departed = new Map<string, number>();

  constructor(
    private readonly selfId: string,
    private readonly leaseMs: number,
    private readonly handlers: BusHandlers,
  ) {}

  get size(): number {
    return this.peers.size;
  }

  /** Whether this peer said `gone` (recently): nothing of it is applied. */
  hasLeft(peerId: string): boolean {
    return this.departed.has(peerId);
  }

  /** The liveness check found this peer's lease lapsed (bus protocol 2): removed. */
  expire(peerId: string): boolean {
    if (!this.peers.has(peerId)) return false;
    this.remove(peerId);
    return true;
  }

  /** A snapshot from the channel, a heartbeat repair or a reload: delivered only when newer. */
  offer(snapshot: WireSnapshot, nowMs: number): void {
    const peerId = snapshot.ownerId;
    if (peerId === this.selfId || this.departed.has(peerId)) return;
    const held = this.peers.get(peerId);
    if (held !== undefined) {
      held.lastHeardMs = nowMs;
      if (held.version >= snapshot.version) return;
      held.version = snapshot.version;
    } else {
      this.peers.set(peerId, { version: snapshot.version, lastHeardMs: nowMs });
    }
    this.handlers.snapshot(snapshot);
  }

  /** A heartbeat: refreshes the peer's clock; true when its key must be fetched (a snapshot was missed). */
  heartbeat(peerId: string, version: number, nowMs: number): boolean {
    if (peerId === this.selfId || this.departed.has(peerId)) return false;
    const held = this.peers.get(peerId);
    if (held === undefined) return true;
    held.lastHeardMs = nowMs;
    return version > held.version;
  }

  /** A clean leave: removed at once and refused from now on (a peer id is never reused). */
  gone(peerId: string, nowMs: number): void {
    if (peerId === this.selfId) return;
    this.departed.set(peerId, nowMs);
    this.remove(peerId);
  }

  /**
   * After a successful full reload: every peer's clock restarts now (time spent disconnected does not
   * count against anyone). Held peers whose key was not found are removed at once only when
   * `removeMissing` (Redis kept its data, so a missing key means an expired lease or a goodbye);
   * otherwise they keep a fresh lease to republish in, and the liveness sweep decides.
   */
  reconcile(presentPeerIds: ReadonlySet<string>, removeMissing: boolean, nowMs: number): string[] {
    const missing: string[] = [];
    for (const [peerId, held] of this.peers) {
      held.lastHeardMs = nowMs;
      if (!presentPeerIds.has(peerId)) missing.push(peerId);
    }
    if (removeMissing) for (const peerId of missing) this.remove(peerId);
    return missing;
  }

  /**
   * Removes peers not heard from for a whole lease before `linkProvenAtMs`: the moment up to which
   * this receiver knows its own subscription delivered everything (see RedisBus heartbeat). Using
   * that moment instead of "now" is what keeps a receiver whose own link is down from purging anyone.
   */
  sweep(linkProvenAtMs: number, nowMs: number): string[] {
    const expired: string[] = [];
    for (const [peerId, held] of this.peers) {
      if (held.lastHeardMs + this.leaseMs < linkProvenAtMs) expired.push(peerId);
    }
    for (const peerId of expired) this.remove(peerId);
    const forgetBefore = nowMs - Math.max(DEPARTED_MEMORY_MIN_MS, this.leaseMs * 4);
    for (const [peerId, goneAtMs] of this.departed) if (goneAtMs < forgetBefore) this.departed.delete(peerId);
    return expired;
  }

  private remove(peerId: string): void {
    if (this.peers.delete(peerId)) this.handlers.peerGone(peerId);
  }
}
