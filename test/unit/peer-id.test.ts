import { describe, expect, it } from 'vitest';
import { incarnationOf, peerIdentity } from '../../src/cluster/peer-id.js';

describe('incarnationOf', () => {
  it('gives the child slot and start time of a peer id, so a restarted child is recognised', () => {
    const before = Date.now();
    const first = peerIdentity('node-a', 1);
    const parsed = incarnationOf(first.peerId);
    expect(parsed?.slot).toBe('node-a/1/');
    expect(parsed?.startedMs).toBeGreaterThanOrEqual(before);
    expect(parsed?.startedMs).toBeLessThanOrEqual(Date.now());
    const later = peerIdentity('node-a', 1, `${(Date.now() + 1000).toString(36)}beef`);
    expect(incarnationOf(later.peerId)?.startedMs).toBeGreaterThan(parsed?.startedMs ?? Infinity);
    // Another index is another slot; node ids may contain slashes.
    expect(incarnationOf(peerIdentity('node-a', 2).peerId)?.slot).toBe('node-a/2/');
    expect(incarnationOf(peerIdentity('rack/7', 0).peerId)?.slot).toBe('rack/7/0/');
  });

  it('refuses ids it did not make', () => {
    for (const id of ['', 'plain', '/x', 'node/1/', 'node/1/abc', 'node/1/!!!!beef']) expect(incarnationOf(id)).toBeUndefined();
  });
});
