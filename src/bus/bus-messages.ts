import type { WireSnapshot } from './wire-snapshot.js';
import type { WireDelta } from './wire-delta.js';
import { isDelta } from './wire-delta.js';
import { isPlainObject } from '../values.js';

/**
 * Messages on the bus (IPC through the primary, or Redis pub/sub). One decoder turns anything received
 * into a typed message or a coded error; a message from another cluster (different `cluster` name) is
 * an error too, never applied.
 */
export const BUS_PROTOCOL_VERSION = 1;
/**
 * The Redis bus's protocol (docs/scale.md): deltas on a per-peer version chain. Its messages keep the
 * version-1 envelope and name their protocol in `p`, so a node of the previous build (which sends no
 * `p`) is recognised and refused by name (`BUS_VERSION`) rather than half understood.
 */
export const REDIS_BUS_PROTOCOL = 2;

export type BusMessage =
  | { kind: 'snapshot'; snapshot: WireSnapshot }
  /** Redis bus protocol 2: one peer's change since the version it names. */
  | { kind: 'delta'; delta: WireDelta }
  | { kind: 'heartbeat'; peerId: string; version: number }
  | { kind: 'gone'; peerId: string }
  /** Child → primary (embedded): this channel carries that peer; answered with `sync`. */
  | { kind: 'hello'; peerId: string }
  /** Primary → child (embedded): every snapshot held, sent once when the child starts. */
  | { kind: 'sync'; snapshots: WireSnapshot[] };

export interface BusEnvelope {
  v: typeof BUS_PROTOCOL_VERSION;
  /** The Redis bus protocol (absent: 1, a node of the previous build). */
  p?: number;
  cluster: string;
  message: BusMessage;
}

export type BusDecode =
  | { ok: true; message: BusMessage }
  | {
      ok: false;
      code: 'BUS_MALFORMED' | 'BUS_FOREIGN_CLUSTER' | 'BUS_UNAUTHENTICATED' | 'BUS_STALE' | 'BUS_REPLAYED' | 'BUS_VERSION';
      reason: string;
      /** BUS_VERSION: the peer that speaks another protocol. */
      peerId?: string;
    };

const isObject = isPlainObject;

function isSnapshot(v: unknown): v is WireSnapshot {
  return (
    isObject(v) &&
    typeof v.ownerId === 'string' &&
    v.ownerId.length > 0 &&
    typeof v.version === 'number' &&
    Number.isFinite(v.version) &&
    Array.isArray(v.functions) &&
    Array.isArray(v.triggers) &&
    (v.endpoint === undefined || isObject(v.endpoint))
  );
}

export function encodeBusMessage(cluster: string, message: BusMessage, protocol?: number): BusEnvelope {
  return protocol === undefined ? { v: BUS_PROTOCOL_VERSION, cluster, message } : { v: BUS_PROTOCOL_VERSION, p: protocol, cluster, message };
}

export function decodeBusEnvelope(raw: unknown, cluster: string): BusDecode {
  if (!isObject(raw) || raw.v !== BUS_PROTOCOL_VERSION || !isObject(raw.message)) {
    return { ok: false, code: 'BUS_MALFORMED', reason: 'not a bus envelope of this protocol version' };
  }
  if (raw.cluster !== cluster) {
    return { ok: false, code: 'BUS_FOREIGN_CLUSTER', reason: `message for cluster ${JSON.stringify(raw.cluster)}` };
  }
  const m = raw.message;
  switch (m.kind) {
    case 'snapshot':
      return isSnapshot(m.snapshot) ? { ok: true, message: { kind: 'snapshot', snapshot: m.snapshot } } : malformed('snapshot');
    case 'delta':
      return isDelta(m.delta) ? { ok: true, message: { kind: 'delta', delta: m.delta } } : malformed('delta');
    case 'heartbeat':
      return typeof m.peerId === 'string' && typeof m.version === 'number'
        ? { ok: true, message: { kind: 'heartbeat', peerId: m.peerId, version: m.version } }
        : malformed('heartbeat');
    case 'gone':
      return typeof m.peerId === 'string' ? { ok: true, message: { kind: 'gone', peerId: m.peerId } } : malformed('gone');
    case 'hello':
      return typeof m.peerId === 'string' ? { ok: true, message: { kind: 'hello', peerId: m.peerId } } : malformed('hello');
    case 'sync':
      return Array.isArray(m.snapshots) && m.snapshots.every(isSnapshot)
        ? { ok: true, message: { kind: 'sync', snapshots: m.snapshots } }
        : malformed('sync');
    default:
      return malformed(String(m.kind));
  }
}

function malformed(kind: string): BusDecode {
  return { ok: false, code: 'BUS_MALFORMED', reason: `malformed ${kind} message` };
}
