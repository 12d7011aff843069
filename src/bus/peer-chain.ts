import type { Logger } from 'pino';
import { REDIS_BUS_PROTOCOL } from './bus-messages.js';
import type { StoredChain } from './redis-peer-store.js';
import type { WireDelta } from './wire-delta.js';
import { PeerChains } from './wire-delta.js';
import type { WireSnapshot } from './wire-snapshot.js';

/** Deltas of one peer held while that peer is being resynced (more: the resync is repeated). */
const BUFFER_PER_PEER = 1_000;

/** What the receiving side of the peers' chains needs from the Redis bus. */
export interface PeerChainDeps {
  selfId: string;
  /** A peer's state, newer than what was held: on to the peer view (and the table). */
  offer(snapshot: WireSnapshot): void;
  /** The peer said goodbye: nothing of it is applied. */
  hasLeft(peerId: string): boolean;
  /** Reads a peer's checkpoint and log from Redis; undefined when the command connection is not ready. */
  read(peerId: string): Promise<StoredChain> | undefined;
  /** A stored chain written by a node of bus protocol 1 was read. */
  legacy(peerId: string): void;
  closed(): boolean;
  log: Logger;
  warn(key: string, fields: Record<string, unknown>, message: string): void;
}

/**
 * The receiving side of bus protocol 2 (docs/scale.md): each peer's version chain. A full snapshot
 * replaces what is held when newer; a delta that follows the version held is applied; one that does
 * not (a gap, or a peer not held) is buffered and that peer resynced from its checkpoint and log, the
 * buffered deltas applied after them when they chain. Whatever is newer goes on to `offer`.
 */
export class PeerChainReceiver {
  private readonly chains = new PeerChains();
  /** Deltas received for peers being resynced, applied after the resync when they chain. */
  private readonly buffered = new Map<string, WireDelta[]>();
  private readonly fetching = new Set<string>();

  constructor(private readonly deps: PeerChainDeps) {}

  /** A full snapshot from the channel (a join, or a peer of protocol 1). */
  full(snapshot: WireSnapshot): void {
    if (snapshot.ownerId === this.deps.selfId) return;
    const newer = this.chains.full(snapshot);
    if (newer !== undefined) this.deps.offer(newer);
  }

  /** A delta from the channel: applied when it follows the version held; a gap resyncs that peer. */
  delta(delta: WireDelta): void {
    const peerId = delta.ownerId;
    if (peerId === this.deps.selfId || this.deps.hasLeft(peerId)) return;
    if (this.fetching.has(peerId)) {
      this.buffer(delta);
      return;
    }
    const outcome = this.chains.delta(delta);
    if (outcome.result === 'applied') this.deps.offer(outcome.snapshot);
    else if (outcome.result === 'gap') {
      this.deps.log.debug({ peerId, held: outcome.held, from: delta.from, to: delta.to }, 'delta does not follow the version held: resyncing that peer');
      this.buffer(delta);
      this.fetch(peerId);
    }
  }

  /** A peer's checkpoint and log (a reload or a resync), then the deltas buffered meanwhile, as one chain. */
  stored(stored: StoredChain): void {
    if (stored.peerId === this.deps.selfId) return;
    if (stored.checkpoint === undefined) {
      // No checkpoint: the peer is gone, or its key was lost and its next write is a full snapshot.
      this.buffered.delete(stored.peerId);
      return;
    }
    if (stored.protocol < REDIS_BUS_PROTOCOL) this.deps.legacy(stored.peerId);
    let newest = this.chains.full(stored.checkpoint);
    const buffered = this.buffered.get(stored.peerId) ?? [];
    this.buffered.delete(stored.peerId);
    // A buffered delta that does not chain after the store's state is dropped: the store is written
    // before the channel, so only a forged or lost store leaves one, and the next gap reads again.
    for (const delta of [...stored.log, ...buffered.sort((a, b) => a.from - b.from)]) {
      const outcome = this.chains.delta(delta);
      if (outcome.result === 'applied') newest = outcome.snapshot;
    }
    if (newest !== undefined) this.deps.offer(newest);
  }

  /**
   * Every heartbeat interval: a peer with deltas still waiting for a resync that failed (the read was
   * refused, or the command connection was not ready) is read again. This is the receiver's own repair
   * of a gap; senders do not announce their versions (docs/scale.md).
   */
  retry(): void {
    for (const [peerId, deltas] of this.buffered) {
      if (this.fetching.has(peerId)) continue;
      const held = this.chains.version(peerId);
      const waiting = held === undefined ? deltas : deltas.filter((delta) => delta.to > held);
      if (waiting.length === 0) this.buffered.delete(peerId);
      else {
        if (waiting.length !== deltas.length) this.buffered.set(peerId, waiting);
        this.fetch(peerId);
      }
    }
  }

  /** Resync one peer (a gap, a join we missed, a heartbeat announcing a version not held): checkpoint + log. */
  fetch(peerId: string): void {
    if (this.fetching.has(peerId)) return;
    const reading = this.deps.read(peerId);
    if (reading === undefined) return;
    this.fetching.add(peerId);
    reading
      .then(
        (stored) => {
          if (this.deps.closed()) return;
          this.fetching.delete(peerId);
          this.stored(stored);
        },
        (err: unknown) => this.deps.warn('fetch', { err, peerId }, 'redis peer key fetch failed'),
      )
      .finally(() => this.fetching.delete(peerId));
  }

  /** The peer is gone: what was held of it, and buffered for it, goes too. */
  drop(peerId: string): void {
    this.chains.drop(peerId);
    this.buffered.delete(peerId);
  }

  private buffer(delta: WireDelta): void {
    const held = this.buffered.get(delta.ownerId) ?? [];
    if (held.length < BUFFER_PER_PEER) held.push(delta);
    this.buffered.set(delta.ownerId, held);
  }
}
