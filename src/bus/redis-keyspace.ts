import { createHmac, timingSafeEqual } from 'node:crypto';
import type { BusDecode } from './bus-messages.js';
import { decodeBusEnvelope } from './bus-messages.js';
import { checkSnapshot } from './snapshot-check.js';

/** Glob metacharacters of Redis MATCH patterns; a cluster name containing them must match literally. */
const GLOB_SPECIAL = /[\\*?[\]^]/g;

/**
 * Names one cluster's Redis state: a key per peer (`<cluster>:peer:<peerId>`, holding that peer's
 * snapshot envelope under a lease) and one pub/sub channel (`<cluster>:bus`).
 */
export class RedisKeyspace {
  readonly channel: string;
  readonly peerPattern: string;
  private readonly peerPrefix: string;

  /** `secret`: the cluster secret; every text written to Redis carries its HMAC, and text without a valid one is refused. */
  constructor(
    readonly cluster: string,
    private readonly secret: string,
  ) {
    this.channel = `${cluster}:bus`;
    this.peerPrefix = `${cluster}:peer:`;
    this.peerPattern = `${this.peerPrefix.replace(GLOB_SPECIAL, (c) => `\\${c}`)}*`;
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
   * What is written to Redis: `<mac>.<json>`, the mac an HMAC-SHA256 of the JSON under the cluster
   * secret (base64url). Anyone who can write to the Redis but lacks the secret cannot inject a snapshot,
   * a heartbeat or a goodbye (docs/security.md#between-nodes).
   */
  seal(json: string): string {
    return `${this.mac(json)}.${json}`;
  }

  private mac(json: string): string {
    return createHmac('sha256', this.secret).update(json).digest('base64url');
  }

  decode(text: string): BusDecode {
    const dot = text.indexOf('.');
    const json = dot === -1 ? '' : text.slice(dot + 1);
    const given = Buffer.from(dot === -1 ? '' : text.slice(0, dot));
    const expected = Buffer.from(this.mac(json));
    if (dot === -1 || given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return { ok: false, code: 'BUS_UNAUTHENTICATED', reason: 'no valid HMAC of the cluster secret' };
    }
    let raw: unknown;
    try {
      raw = JSON.parse(json);
    } catch {
      return { ok: false, code: 'BUS_MALFORMED', reason: 'not JSON' };
    }
    const decoded = decodeBusEnvelope(raw, this.cluster);
    if (decoded.ok && decoded.message.kind === 'snapshot') {
      const checked = checkSnapshot(decoded.message.snapshot, false);
      if (!checked.ok) return { ok: false, code: 'BUS_MALFORMED', reason: `malformed snapshot: ${checked.reason}` };
    }
    return decoded;
  }
}
