import type { Logger } from 'pino';
import type { WireSnapshot } from './wire-snapshot.js';
import type { Bus, BusHandlers } from './bus.js';
import type { BusMessage } from './bus-messages.js';
import { decodeBusEnvelope, encodeBusMessage } from './bus-messages.js';
import type { IpcChannel } from './ipc-channel.js';
import { BUS_TAG, isTaggedBusMessage } from './ipc-channel.js';

const SYNC_TIMEOUT_MS = 10_000;

/**
 * Embedded mode (no Redis): a child sends its snapshots to the primary, which relays them to its
 * siblings and tells them at once when a child's process is gone (`IpcRelay`).
 */
export class IpcBus implements Bus {
  private handlers: BusHandlers | undefined;
  private unsubscribe: (() => void) | undefined;
  private isSynced = false;
  private closed = false;
  private readonly versions = new Map<string, number>();
  /** Published before start(): the relay refuses snapshots from a child before its hello. */
  private early: WireSnapshot | undefined;
  private rejectStart: ((error: Error) => void) | undefined;

  constructor(
    private readonly channel: IpcChannel,
    private readonly peerId: string,
    private readonly cluster: string,
    private readonly logger: Logger,
  ) {}

  get synced(): boolean {
    return this.isSynced && !this.closed;
  }

  start(handlers: BusHandlers): Promise<void> {
    this.handlers = handlers;
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no sync from the primary within ${SYNC_TIMEOUT_MS} ms`)), SYNC_TIMEOUT_MS);
      this.rejectStart = (error) => {
        clearTimeout(timer);
        reject(error);
      };
      this.unsubscribe = this.channel.onMessage((raw) => {
        if (!isTaggedBusMessage(raw)) return;
        const decoded = decodeBusEnvelope(raw.envelope, this.cluster);
        if (!decoded.ok) {
          this.logger.warn({ code: decoded.code, reason: decoded.reason }, 'bus message refused');
          return;
        }
        if (decoded.message.kind === 'sync' && !this.isSynced) {
          this.isSynced = true;
          clearTimeout(timer);
        }
        this.receive(decoded.message);
        if (this.isSynced) resolve();
      });
      this.send({ kind: 'hello', peerId: this.peerId });
      if (this.early !== undefined) this.send({ kind: 'snapshot', snapshot: this.early });
      this.early = undefined;
    });
  }

  publish(snapshot: WireSnapshot): void {
    if (this.closed) return;
    if (this.handlers === undefined) this.early = snapshot;
    else this.send({ kind: 'snapshot', snapshot });
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.send({ kind: 'gone', peerId: this.peerId });
      this.unsubscribe?.();
      // A start() still waiting for the primary's sync settles now, not at its timeout.
      if (!this.isSynced) this.rejectStart?.(new Error('IpcBus closed before it synced'));
    }
    return Promise.resolve();
  }

  private send(message: BusMessage): void {
    this.channel.send({ sy: BUS_TAG, envelope: encodeBusMessage(this.cluster, message) });
  }

  private receive(message: BusMessage): void {
    const handlers = this.handlers;
    if (handlers === undefined || this.closed) return;
    switch (message.kind) {
      case 'sync':
        for (const snapshot of message.snapshots) this.deliver(snapshot, handlers);
        return;
      case 'snapshot':
        this.deliver(message.snapshot, handlers);
        return;
      case 'gone':
        if (message.peerId !== this.peerId && this.versions.delete(message.peerId)) handlers.peerGone(message.peerId);
        return;
      default:
        return;
    }
  }

  private deliver(snapshot: WireSnapshot, handlers: BusHandlers): void {
    if (snapshot.ownerId === this.peerId) return;
    const held = this.versions.get(snapshot.ownerId);
    if (held !== undefined && held >= snapshot.version) return;
    this.versions.set(snapshot.ownerId, snapshot.version);
    handlers.snapshot(snapshot);
  }
}
