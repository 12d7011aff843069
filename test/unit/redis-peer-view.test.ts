import { describe, expect, it } from 'vitest';
import { RedisPeerView } from '../../src/bus/redis-peer-view.js';
import type { WireSnapshot } from '../../src/bus/wire-snapshot.js';

const LEASE_MS = 1000;
const snap = (ownerId: string, version: number): WireSnapshot => ({ ownerId, version, functions: [], triggers: [] });

function view(): { view: RedisPeerView; events: string[] } {
  const events: string[] = [];
  return {
    events,
    view: new RedisPeerView('self', LEASE_MS, {
      snapshot: (s) => events.push(`snapshot ${s.ownerId}@${s.version}`),
      peerGone: (peerId) => events.push(`gone ${peerId}`),
    }),
  };
}

describe('RedisPeerView', () => {
  it('delivers only newer snapshots, never its own', () => {
    const { view: v, events } = view();
    v.offer(snap('a', 2), 0);
    v.offer(snap('a', 1), 10);
    v.offer(snap('a', 2), 20);
    v.offer(snap('a', 3), 30);
    v.offer(snap('self', 9), 40);
    expect(events).toEqual(['snapshot a@2', 'snapshot a@3']);
    expect(v.size).toBe(1);
  });

  it('asks for a fetch when a heartbeat is ahead of the held version or the peer is unknown', () => {
    const { view: v } = view();
    expect(v.heartbeat('a', 1, 0)).toBe(true);
    v.offer(snap('a', 1), 0);
    expect(v.heartbeat('a', 1, 10)).toBe(false);
    expect(v.heartbeat('a', 2, 20)).toBe(true);
    expect(v.heartbeat('self', 5, 20)).toBe(false);
  });

  it('removes a peer that said goodbye at once and refuses its late messages', () => {
    const { view: v, events } = view();
    v.offer(snap('a', 1), 0);
    v.gone('a', 10);
    v.offer(snap('a', 2), 20);
    expect(v.heartbeat('a', 3, 30)).toBe(false);
    expect(events).toEqual(['snapshot a@1', 'gone a']);
  });

  it('sweeps a peer unheard for a lease before the moment its own link was proven, not before now', () => {
    const { view: v, events } = view();
    v.offer(snap('a', 1), 0);
    v.offer(snap('b', 1), 900);
    // Our own link was last proven at 500: nobody can be blamed for silence after that.
    expect(v.sweep(500, 5000)).toEqual([]);
    expect(v.sweep(1500, 5000)).toEqual(['a']);
    expect(events.at(-1)).toBe('gone a');
    v.heartbeat('b', 1, 1800);
    expect(v.sweep(2700, 5000)).toEqual([]);
  });

  it('restarts every clock on a reload, removing missing peers only when Redis kept its data', () => {
    const { view: v, events } = view();
    v.offer(snap('a', 1), 0);
    v.offer(snap('b', 1), 0);
    expect(v.reconcile(new Set(['a']), false, 10_000)).toEqual(['b']);
    expect(v.size).toBe(2);
    // Fresh clocks: no one is swept for the time the link was down.
    expect(v.sweep(10_500, 10_500)).toEqual([]);
    expect(v.reconcile(new Set(['a']), true, 11_000)).toEqual(['b']);
    expect(v.size).toBe(1);
    expect(events.at(-1)).toBe('gone b');
  });

  it('forgets a departed peer after a while (bounded memory), so the id could be heard again', () => {
    const { view: v, events } = view();
    v.gone('a', 0);
    v.sweep(0, 60_001);
    v.offer(snap('a', 1), 60_002);
    expect(events).toEqual(['snapshot a@1']);
  });
});
