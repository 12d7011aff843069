import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

/**
 * A peer is one child process incarnation: node id + process index + start epoch. A restarted child
 * is a new peer, so versions never have to survive a restart.
 */
export interface PeerIdentity {
  nodeId: string;
  index: number;
  epoch: string;
  peerId: string;
}

/** Default node id: host name plus a random suffix, so two engines on one host never collide. */
export function defaultNodeId(): string {
  return `${hostname()}-${randomBytes(3).toString('hex')}`;
}

export function peerIdentity(nodeId: string, index: number, epoch = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`): PeerIdentity {
  return { nodeId, index, epoch, peerId: `${nodeId}/${index}/${epoch}` };
}

/**
 * The child slot (`node/index/`) and start time of a peer id, or undefined for an id this code did
 * not make. Two ids of one slot are two incarnations of one child; the later start is the live one.
 */
export function incarnationOf(peerId: string): { slot: string; startedMs: number } | undefined {
  const cut = peerId.lastIndexOf('/');
  if (cut <= 0) return undefined;
  const epoch = peerId.slice(cut + 1);
  const startedMs = parseInt(epoch.slice(0, -4), 36);
  if (!Number.isSafeInteger(startedMs) || epoch.length <= 4) return undefined;
  return { slot: peerId.slice(0, cut + 1), startedMs };
}
