import type { Redis } from 'ioredis';
import type { WireSnapshot } from './wire-snapshot.js';
import type { WireDelta } from './wire-delta.js';
import type { BusMessage } from './bus-messages.js';
import { REDIS_BUS_PROTOCOL, encodeBusMessage } from './bus-messages.js';
import type { RedisKeyspace } from './redis-keyspace.js';

const SCAN_COUNT = 500;
const MGET_CHUNK = 100;
/** The log is folded into a new checkpoint once it holds more bytes than this or than the checkpoint. */
const LOG_MIN_BYTES = 64 * 1024;
/** Old members returned per liveness check (the next interval returns the rest). */
const EXPIRED_BATCH = 64;

/** A peer's state as stored: its checkpoint and the deltas written since (docs/scale.md). */
export interface StoredChain {
  peerId: string;
  checkpoint: WireSnapshot | undefined;
  log: WireDelta[];
  /** The bus protocol its writer speaks (1: a node of the previous build). */
  protocol: number;
}

export function versionReason(protocol: number): string {
  return `peer speaks bus protocol ${protocol}, this node ${REDIS_BUS_PROTOCOL}`;
}

/** Refreshes the lease of our keys and our score (Redis server time) in the liveness set. */
const HEARTBEAT_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local kept = redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[3], now, ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return kept`;

/** Members of the liveness set not refreshed for `lease` ms (Redis server time): normally none. */
const EXPIRED_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]), 'LIMIT', 0, tonumber(ARGV[2]))`;

/**
 * Takes out of the liveness set the members not refreshed for ARGV[1] ms (Redis server time): peers
 * gone long enough that every process has had many sweeps to see them lapse.
 */
const FORGET_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]))`;

/**
 * A lapsed peer stays in the liveness set this many leases, so that every process's sweep finds it
 * (each removes it from its own table). Taken out at once by the first sweeper, it was removed by
 * that process only: the others kept the dead peer's routes (test/integration/bus-expiry.test.ts).
 */
export const FORGET_AFTER_LEASES = 10;

interface Scripted {
  syHeartbeat(key: string, log: string, alive: string, peerId: string, leaseMs: number, aliveTtlMs: number): Promise<number>;
  syExpired(alive: string, leaseMs: number, batch: number): Promise<string[]>;
  syForget(alive: string, olderThanMs: number): Promise<number>;
}

const scripted = new WeakSet<Redis>();
function scripts(cmd: Redis): Scripted {
  if (!scripted.has(cmd)) {
    cmd.defineCommand('syHeartbeat', { numberOfKeys: 3, lua: HEARTBEAT_LUA });
    cmd.defineCommand('syExpired', { numberOfKeys: 1, lua: EXPIRED_LUA });
    cmd.defineCommand('syForget', { numberOfKeys: 1, lua: FORGET_LUA });
    scripted.add(cmd);
  }
  return cmd as unknown as Scripted;
}

async function exec(pipeline: ReturnType<Redis['multi']>): Promise<void> {
  const results = await pipeline.exec();
  if (results === null) throw new Error('redis transaction aborted');
  const failed = results.find(([err]) => err !== null)?.[0];
  if (failed) throw failed;
}

/**
 * The Redis commands of the bus, over whichever command connection is current: this peer's checkpoint
 * and delta log (written with a lease, refreshed, deleted), its score in the liveness set, announcements
 * on the channel, reads of other peers' state. Every stored value is the same sealed envelope as a
 * channel message and goes through the one decoder.
 */
export class RedisPeerStore {
  readonly ownKey: string;
  private readonly ownLog: string;
  private checkpointBytes = 0;
  private logBytes = 0;

  constructor(
    private readonly keys: RedisKeyspace,
    private readonly peerId: string,
    private readonly leaseMs: number,
    private readonly onRefused: (key: string, reason: string, code: string) => void,
  ) {
    this.ownKey = keys.peerKey(peerId);
    this.ownLog = keys.logKey(peerId);
  }

  /** A new checkpoint, the log emptied, the full snapshot published (join, or our state was lost). */
  async writeFull(cmd: Redis, snapshot: WireSnapshot): Promise<void> {
    const text = this.encode({ kind: 'snapshot', snapshot });
    await exec(cmd.multi().set(this.ownKey, text, 'PX', this.leaseMs).del(this.ownLog).publish(this.keys.channel, text));
    this.checkpointBytes = text.length;
    this.logBytes = 0;
    await this.refreshLease(cmd);
  }

  /**
   * A delta, published; appended to the log, or — once the log outgrew the checkpoint — folded with
   * it into a new checkpoint (`snapshot` is the state the delta leads to). Either way one MULTI.
   */
  async writeDelta(cmd: Redis, delta: WireDelta, snapshot: WireSnapshot): Promise<void> {
    const text = this.encode({ kind: 'delta', delta });
    if (this.logBytes + text.length > Math.max(this.checkpointBytes, LOG_MIN_BYTES)) {
      const checkpoint = this.encode({ kind: 'snapshot', snapshot });
      await exec(cmd.multi().set(this.ownKey, checkpoint, 'PX', this.leaseMs).del(this.ownLog).publish(this.keys.channel, text));
      this.checkpointBytes = checkpoint.length;
      this.logBytes = 0;
      return;
    }
    await exec(cmd.multi().rpush(this.ownLog, text).pexpire(this.ownLog, this.leaseMs).publish(this.keys.channel, text));
    this.logBytes += text.length;
  }

  /** Lease of our keys and our liveness score: false when our checkpoint is gone (Redis lost it, or the lease lapsed). */
  async refreshLease(cmd: Redis): Promise<boolean> {
    const kept = await scripts(cmd).syHeartbeat(this.ownKey, this.ownLog, this.keys.aliveKey, this.peerId, this.leaseMs, this.leaseMs * 10);
    return kept === 1;
  }

  /** Peers whose liveness score is older than a lease (candidates: the caller checks their key). */
  async expired(cmd: Redis): Promise<string[]> {
    return (await scripts(cmd).syExpired(this.keys.aliveKey, this.leaseMs, EXPIRED_BATCH)).filter((id) => id !== this.peerId);
  }

  /** Whether a peer's checkpoint is still in Redis (its lease has not lapsed). */
  async present(cmd: Redis, peerId: string): Promise<boolean> {
    return (await cmd.exists(this.keys.peerKey(peerId))) === 1;
  }

  /**
   * Lapsed peers were found (`peerIds`): the liveness set forgets those, and any other member, not
   * refreshed for FORGET_AFTER_LEASES leases; until then every process's sweep still finds them.
   */
  async forget(cmd: Redis, peerIds: readonly string[]): Promise<void> {
    if (peerIds.length > 0) await scripts(cmd).syForget(this.keys.aliveKey, this.leaseMs * FORGET_AFTER_LEASES);
  }

  /** Announces the version Redis holds for us: sent once after a burst of changes, not every interval. */
  async heartbeat(cmd: Redis, version: number): Promise<void> {
    await cmd.publish(this.keys.channel, this.encode({ kind: 'heartbeat', peerId: this.peerId, version }));
  }

  async goodbye(cmd: Redis): Promise<void> {
    await exec(
      cmd.multi().del(this.ownKey, this.ownLog).zrem(this.keys.aliveKey, this.peerId).publish(this.keys.channel, this.encode({ kind: 'gone', peerId: this.peerId })),
    );
  }

  /** One peer's checkpoint and log, read atomically. */
  async read(cmd: Redis, peerId: string): Promise<StoredChain> {
    return (await this.readMany(cmd, [this.keys.peerKey(peerId)]))[0] ?? { peerId, checkpoint: undefined, log: [], protocol: REDIS_BUS_PROTOCOL };
  }

  /**
   * Every peer of the cluster: SCAN (never KEYS, which blocks Redis), then each chunk's checkpoints and
   * logs in one MULTI. `checkCurrent` throws when the connection changed meanwhile, abandoning a stale load.
   */
  async loadAll(cmd: Redis, checkCurrent: () => void): Promise<StoredChain[]> {
    const found = new Set<string>(); // SCAN may return a key twice
    let cursor = '0';
    do {
      const [next, batch] = await cmd.scan(cursor, 'MATCH', this.keys.peerPattern, 'COUNT', SCAN_COUNT);
      checkCurrent();
      for (const key of batch) found.add(key);
      cursor = next;
    } while (cursor !== '0');
    const keys = [...found];
    const chains: StoredChain[] = [];
    for (let i = 0; i < keys.length; i += MGET_CHUNK) {
      const chunk = await this.readMany(cmd, keys.slice(i, i + MGET_CHUNK));
      checkCurrent();
      for (const chain of chunk) if (chain.checkpoint !== undefined) chains.push(chain);
    }
    return chains;
  }

  private async readMany(cmd: Redis, keys: readonly string[]): Promise<StoredChain[]> {
    const multi = cmd.multi();
    for (const key of keys) multi.get(key).lrange(this.keys.logKey(this.keys.peerIdOf(key) ?? ''), 0, -1);
    const results = await multi.exec();
    if (results === null) throw new Error('redis transaction aborted');
    return keys.map((key, j) => {
      const peerId = this.keys.peerIdOf(key) ?? '';
      const [checkpointErr, checkpointText] = results[2 * j] ?? [null, null];
      const [logErr, logTexts] = results[2 * j + 1] ?? [null, []];
      if (checkpointErr) throw checkpointErr;
      if (logErr) throw logErr;
      const stored = typeof checkpointText === 'string' ? this.decodeStored(key, checkpointText) : undefined;
      const checkpoint = stored?.snapshot;
      const log: WireDelta[] = [];
      if (checkpoint !== undefined && Array.isArray(logTexts)) {
        for (const text of logTexts) {
          const delta = typeof text === 'string' ? this.decodeLogEntry(key, peerId, text) : undefined;
          if (delta === undefined) break; // a refused entry ends the chain: the rest cannot apply
          log.push(delta);
        }
      }
      return { peerId, checkpoint, log, protocol: stored?.protocol ?? REDIS_BUS_PROTOCOL };
    });
  }

  private decodeStored(key: string, text: string): { snapshot: WireSnapshot; protocol: number } | undefined {
    const decoded = this.keys.decode(text, 'stored');
    if (decoded.ok && decoded.message.kind === 'snapshot' && decoded.message.snapshot.ownerId === this.keys.peerIdOf(key)) {
      if (decoded.protocol > REDIS_BUS_PROTOCOL) {
        this.onRefused(key, versionReason(decoded.protocol), 'BUS_VERSION');
        return undefined;
      }
      return { snapshot: decoded.message.snapshot, protocol: decoded.protocol };
    }
    this.onRefused(key, decoded.ok ? 'the key does not hold that peer’s snapshot' : decoded.reason, decoded.ok ? 'BUS_MALFORMED' : decoded.code);
    return undefined;
  }

  private decodeLogEntry(key: string, peerId: string, text: string): WireDelta | undefined {
    const decoded = this.keys.decode(text, 'stored');
    if (decoded.ok && decoded.message.kind === 'delta' && decoded.message.delta.ownerId === peerId && decoded.protocol === REDIS_BUS_PROTOCOL) return decoded.message.delta;
    this.onRefused(key, decoded.ok ? 'the log does not hold that peer’s deltas' : decoded.reason, decoded.ok ? 'BUS_MALFORMED' : decoded.code);
    return undefined;
  }

  private encode(message: BusMessage): string {
    return this.keys.seal(JSON.stringify(encodeBusMessage(this.keys.cluster, message, REDIS_BUS_PROTOCOL)));
  }
}
