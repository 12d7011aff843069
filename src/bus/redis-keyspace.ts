import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { BusDecode, BusMessage } from './bus-messages.js';
import { decodeBusEnvelope } from './bus-messages.js';
import { deltaAsSnapshot } from './wire-delta.js';
import { BUS_MAX_AGE_MS, ReplayGuard } from './replay-guard.js';
import { checkSnapshot } from './snapshot-check.js';

/** How a message read from Redis is checked: `channel` messages must be fresh and new; `stored` peer keys (rewritten only on change) need not. */
export type Received = 'channel' | 'stored';

/** A decoded message and the Redis bus protocol its writer speaks (`p` of the envelope; none: 1). */
export type KeyspaceDecode = { ok: true; message: BusMessage; protocol: number } | Extract<BusDecode, { ok: false }>;

/** `<sender>:<seq>:<ms>` (seal()). */
const STAMP = /^([A-Za-z0-9_-]{1,64}):(\d{1,15}):(\d{1,15})$/;

/** Glob metacharacters of Redis MATCH patterns; a cluster name containing them must match literally. */
const GLOB_SPECIAL = /[\\*?[\]^]/g;

/**
 * Names one cluster's Redis state: a key per peer (`<cluster>:peer:<peerId>`, holding that peer's
 * snapshot envelope under a lease) and one pub/sub channel (`<cluster>:bus`).
 */
export class RedisKeyspace {
  readonly channel: string;
  readonly peerPattern: string;
  /** The sorted set of peers by their last lease refresh (Redis server time): liveness in O(peers). */
  readonly aliveKey: string;
  private readonly peerPrefix: string;
  /** This process's sender id in stamps (random: a restarted process is a new sender). */
  private readonly sender = randomBytes(9).toString('base64url');
  private seq = 0;
  private readonly replays = new ReplayGuard();

  /** `secret`: the cluster secret; every text written to Redis carries its HMAC, and text without a valid one is refused. */
  constructor(
    readonly cluster: string,
    private readonly secret: string,
  ) {
    this.channel = `${cluster}:bus`;
    this.peerPrefix = `${cluster}:peer:`;
    this.peerPattern = `${this.peerPrefix.replace(GLOB_SPECIAL, (c) => `\\${c}`)}*`;
    this.aliveKey = `${cluster}:alive`;
  }

  /** A peer's deltas since its checkpoint (a list of sealed delta messages). */
  logKey(peerId: string): string {
    return `${this.cluster}:log:${peerId}`;
  }

  peerKey(peerId: string): string {
    return `${this.peerPrefix}${peerId}`;
  }

  /** The peer id a key names, or undefined for a key outside this cluster's peer keys. */
  peerIdOf(key: string): string | undefined {
    return key.startsWith(this.peerPrefix) ? key.slice(this.peerPrefix.length) : undefined;
  }

  /**
   * Text from the channel or a peer key, through the one bus decoder. A snapshot must also pass the
   * deep check here, before the peer view records its version: refused only later, by the table, a
   * snapshot claiming a live peer's id and a huge version would make every genuine snapshot of that
   * peer look stale. (Whether a trigger is valid does not depend on ignore_trailing_slash, which only
   * strips trailing slashes; the engine checks again with its own setting when it applies it.)
   */
  /**
   * What is written to Redis: `<mac>.<stamp>.<json>`. The stamp is `<sender>:<seq>:<ms>`: this
   * process's random sender id, a sequence number that only grows, and the wall clock; the mac is an
   * HMAC-SHA256 of stamp and JSON under the cluster secret (base64url). Anyone who can write to the
   * Redis but lacks the secret cannot inject a snapshot, a heartbeat or a goodbye, nor replay a
   * captured one on the channel: receivers refuse a stamp seen before or older than BUS_MAX_AGE_MS
   * (docs/security.md#between-nodes).
   */
  seal(json: string): string {
    const stamp = `${this.sender}:${++this.seq}:${Date.now()}`;
    return `${this.mac(stamp, json)}.${stamp}.${json}`;
  }

  private mac(stamp: string, json: string): string {
    return createHmac('sha256', this.secret).update(stamp).update('.').update(json).digest('base64url');
  }

  decode(text: string, received: Received = 'channel', nowMs = Date.now()): KeyspaceDecode {
    const first = text.indexOf('.');
    const second = first === -1 ? -1 : text.indexOf('.', first + 1);
    const stamp = second === -1 ? '' : text.slice(first + 1, second);
    const json = second === -1 ? '' : text.slice(second + 1);
    const given = Buffer.from(second === -1 ? '' : text.slice(0, first));
    const expected = Buffer.from(this.mac(stamp, json));
    if (second === -1 || given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return { ok: false, code: 'BUS_UNAUTHENTICATED', reason: 'no valid HMAC of the cluster secret' };
    }
    const parts = STAMP.exec(stamp);
    if (parts === null) return { ok: false, code: 'BUS_MALFORMED', reason: 'malformed stamp' };
    const [, sender = '', seqText = '', msText = ''] = parts;
    const seq = Number(seqText);
    const sentMs = Number(msText);
    if (received === 'channel') {
      const verdict = this.replays.check(sender, seq, sentMs, nowMs);
      if (verdict === 'stale') return { ok: false, code: 'BUS_STALE', reason: `sent ${Math.round((nowMs - sentMs) / 1000)} s from now (clocks must agree within ${BUS_MAX_AGE_MS / 1000} s)` };
      if (verdict === 'replayed') return { ok: false, code: 'BUS_REPLAYED', reason: 'a message seen before' };
    }
    let raw: unknown;
    try {
      raw = JSON.parse(json);
    } catch {
      return { ok: false, code: 'BUS_MALFORMED', reason: 'not JSON' };
    }
    const decoded = decodeBusEnvelope(raw, this.cluster);
    if (!decoded.ok) return decoded;
    const message = decoded.message;
    if (message.kind === 'snapshot') {
      const checked = checkSnapshot(message.snapshot, false);
      if (!checked.ok) return { ok: false, code: 'BUS_MALFORMED', reason: `malformed snapshot: ${checked.reason}` };
    } else if (message.kind === 'delta') {
      // Only the records the delta carries are checked (each once: snapshot-check.ts caches per record).
      const checked = checkSnapshot(deltaAsSnapshot(message.delta), false);
      if (!checked.ok) return { ok: false, code: 'BUS_MALFORMED', reason: `malformed delta: ${checked.reason}` };
    }
    const protocol = (raw as { p?: unknown }).p;
    return { ok: true, message, protocol: typeof protocol === 'number' ? protocol : 1 };
  }
}
