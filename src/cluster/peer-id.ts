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
