import type { Logger } from 'pino';
import type { WireSnapshot } from './wire-snapshot.js';
import type { BusMessage } from './bus-messages.js';
import { decodeBusEnvelope, encodeBusMessage } from './bus-messages.js';
import type { IpcChannel } from './ipc-channel.js';
import { BUS_TAG, isTaggedBusMessage } from './ipc-channel.js';

interface Attached {
  peerIds: Set<string>;
  unsubscribe: () => void;
}

/**
 * The primary's side of the embedded bus: keeps the newest snapshot of every child's peer, relays
 * each new one to the other children, answers `hello` with everything it holds, and drops a child's
 * peer the moment its channel is detached (the process exited), so its routes vanish at once.
 */
export class IpcRelay {
  private readonly snapshots = new Map<string, WireSnapshot>();
  private readonly channels = new Map<IpcChannel, Attached>();

  constructor(
    private readonly cluster: string,
    private readonly logger: Logger,
  ) {}

  /** Number of peers whose snapshot is held. */
  get peerCount(): number {
    return this.snapshots.size;
  }

  /** The newest version held for each peer (for readiness: is every child in sync?). */
  versions(): Map<string, number> {
    return new Map([...this.snapshots].map(([peerId, snapshot]) => [peerId, snapshot.version]));
  }

  attach(channel: IpcChannel): void {
    const attached: Attached = { peerIds: new Set(), unsubscribe: () => undefined };
    attached.unsubscribe = channel.onMessage((raw) => this.receive(channel, attached, raw));
    this.channels.set(channel, attached);
  }

  detach(channel: IpcChannel): void {
    const attached = this.channels.get(channel);
    if (attached === undefined) return;
    attached.unsubscribe();
    this.channels.delete(channel);
    for (const peerId of attached.peerIds) this.drop(peerId);
  }

  private receive(channel: IpcChannel, attached: Attached, raw: unknown): void {
    if (!isTaggedBusMessage(raw)) return;
    const decoded = decodeBusEnvelope(raw.envelope, this.cluster);
    if (!decoded.ok) {
      this.logger.warn({ code: decoded.code, reason: decoded.reason }, 'bus message from a child refused');
      return;
    }
    const message = decoded.message;
    switch (message.kind) {
      case 'hello':
        attached.peerIds.add(message.peerId);
        // One message per snapshot, then an empty sync: all of them in one message could pass what
        // one IPC message can carry (each snapshot is bounded: docs/security.md#limits).
        for (const snapshot of this.snapshots.values()) this.send(channel, { kind: 'snapshot', snapshot });
        this.send(channel, { kind: 'sync', snapshots: [] });
        return;
      case 'snapshot': {
        const snapshot = message.snapshot;
        // A child may only speak for the peer it said hello as.
        if (!attached.peerIds.has(snapshot.ownerId)) {
          this.logger.warn({ ownerId: snapshot.ownerId }, 'snapshot for a peer this child does not carry refused');
          return;
        }
        const held = this.snapshots.get(snapshot.ownerId);
        if (held !== undefined && held.version >= snapshot.version) return;
        this.snapshots.set(snapshot.ownerId, snapshot);
        this.broadcast(channel, message);
        return;
      }
      case 'gone':
        if (attached.peerIds.delete(message.peerId)) this.drop(message.peerId);
        return;
      default:
        return;
    }
  }

  private drop(peerId: string): void {
    if (!this.snapshots.delete(peerId)) return;
    this.logger.info({ peerId }, 'peer removed from the table');
    this.broadcast(undefined, { kind: 'gone', peerId });
  }

  private broadcast(except: IpcChannel | undefined, message: BusMessage): void {
    for (const channel of this.channels.keys()) if (channel !== except) this.send(channel, message);
  }

  private send(channel: IpcChannel, message: BusMessage): void {
    channel.send({ sy: BUS_TAG, envelope: encodeBusMessage(this.cluster, message) });
  }
}
