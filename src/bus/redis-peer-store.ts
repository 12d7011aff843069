import type { Redis } from 'ioredis';
import type { WireSnapshot } from './wire-snapshot.js';
import type { BusMessage } from './bus-messages.js';
import { encodeBusMessage } from './bus-messages.js';
import type { RedisKeyspace } from './redis-keyspace.js';

const SCAN_COUNT = 500;
const MGET_CHUNK = 100;

/**
 * The Redis commands of the bus, over whichever command connection is current: this peer's key
 * (written with a lease, refreshed, deleted) and announcements on the channel, reads of other peers'
 * keys. Every stored value is the same envelope as a channel message and goes through the one decoder.
 */
export class RedisPeerStore {
  readonly ownKey: string;

  constructor(
    private readonly keys: RedisKeyspace,
    private readonly peerId: string,
    private readonly leaseMs: number,
    private readonly onRefused: (key: string, reason: string, code: string) => void,
  ) {
    this.ownKey = keys.peerKey(peerId);
  }

  /** Stores the snapshot under a fresh lease and announces it. */
  async write(cmd: Redis, snapshot: WireSnapshot): Promise<void> {
    const text = this.encode({ kind: 'snapshot', snapshot });
    const results = await cmd.pipeline().set(this.ownKey, text, 'PX', this.leaseMs).publish(this.keys.channel, text).exec();
    const failed = results?.find(([err]) => err !== null)?.[0];
    if (failed) throw failed;
  }

  /** PEXPIRE on our key: false when the key is gone (Redis lost it, or the lease lapsed). */
  async refreshLease(cmd: Redis): Promise<boolean> {
    return (await cmd.pexpire(this.ownKey, this.leaseMs)) === 1;
  }

  async heartbeat(cmd: Redis, version: number): Promise<void> {
    await cmd.publish(this.keys.channel, this.encode({ kind: 'heartbeat', peerId: this.peerId, version }));
  }

  async goodbye(cmd: Redis): Promise<void> {
    const results = await cmd.pipeline().del(this.ownKey).publish(this.keys.channel, this.encode({ kind: 'gone', peerId: this.peerId })).exec();
    const failed = results?.find(([err]) => err !== null)?.[0];
    if (failed) throw failed;
  }

  /** One peer's key, when it holds a valid snapshot of that peer. */
  async read(cmd: Redis, peerId: string): Promise<WireSnapshot | undefined> {
    const key = this.keys.peerKey(peerId);
    const text = await cmd.get(key);
    return text === null ? undefined : this.decodeStored(key, text);
  }

  /**
   * Every peer key of the cluster: SCAN (never KEYS, which blocks Redis) then MGET in chunks.
   * `checkCurrent` throws when the connection changed meanwhile, abandoning a stale load.
   */
  async loadAll(cmd: Redis, checkCurrent: () => void): Promise<WireSnapshot[]> {
    const found = new Set<string>(); // SCAN may return a key twice
    let cursor = '0';
    do {
      const [next, batch] = await cmd.scan(cursor, 'MATCH', this.keys.peerPattern, 'COUNT', SCAN_COUNT);
      checkCurrent();
      for (const key of batch) found.add(key);
      cursor = next;
    } while (cursor !== '0');
    const keys = [...found];
    const snapshots: WireSnapshot[] = [];
    for (let i = 0; i < keys.length; i += MGET_CHUNK) {
      const chunk = keys.slice(i, i + MGET_CHUNK);
      const values = await cmd.mget(chunk);
      checkCurrent();
      chunk.forEach((key, j) => {
        const text = values[j];
        const snapshot = typeof text === 'string' ? this.decodeStored(key, text) : undefined;
        if (snapshot !== undefined) snapshots.push(snapshot);
      });
    }
    return snapshots;
  }

  private decodeStored(key: string, text: string): WireSnapshot | undefined {
    const decoded = this.keys.decode(text, 'stored');
    if (decoded.ok && decoded.message.kind === 'snapshot' && decoded.message.snapshot.ownerId === this.keys.peerIdOf(key)) {
      return decoded.message.snapshot;
    }
    this.onRefused(key, decoded.ok ? 'the key does not hold that peer’s snapshot' : decoded.reason, decoded.ok ? 'BUS_MALFORMED' : decoded.code);
    return undefined;
  }

  private encode(message: BusMessage): string {
    return this.keys.seal(JSON.stringify(encodeBusMessage(this.keys.cluster, message)));
  }
}
