// A peer's publications are coalesced (src/cluster/membership.ts): over 5 ms, or within a burst over
// ten times what the last publication cost. That cost is CPU time: a publication that waited for a core
// (here: blocked without using one) must not delay the next by ten times its wall time.
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Bus, BusHandlers } from '../../src/bus/bus.js';
import type { WireSnapshot } from '../../src/bus/wire-snapshot.js';
import { ClusterMembership } from '../../src/cluster/membership.js';
import type { MembershipOptions } from '../../src/cluster/membership.js';
import type { OwnerSnapshot } from '../../src/routing/registrations.js';

/** Blocks this thread for `ms` of wall time without using the CPU. */
function blockWithoutCpu(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * A membership over an in-memory bus: `published` collects what it publishes; each local snapshot
 * first runs `beforeSnapshot` (the cost of a publication, set per step by the test).
 */
async function joined(recordsShared: boolean | undefined, beforeSnapshot: () => void): Promise<{ membership: ClusterMembership; published: WireSnapshot[] }> {
  const published: WireSnapshot[] = [];
  const bus: Bus = {
    synced: true,
    ...(recordsShared === undefined ? {} : { recordsShared }),
    start: (_handlers: BusHandlers) => Promise.resolve(),
    publish: (snapshot: WireSnapshot) => void published.push(snapshot),
    close: () => Promise.resolve(),
  };
  let version = 0;
  const local = {
    ownerId: 'n1/0/1',
    snapshot: (): OwnerSnapshot => {
      beforeSnapshot();
      return { ownerId: 'n1/0/1', version: ++version, functions: [], triggers: [] };
    },
  };
  const membership = new ClusterMembership({ bus, local, logger: pino({ level: 'silent' }) } as unknown as MembershipOptions);
  await membership.join({ nodeId: 'n1', host: '127.0.0.1', port: 1 });
  return { membership, published };
}

describe('ClusterMembership publication coalescing', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('delays the next publication in a burst by the CPU the last one cost, not its wall time', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    let stallMs = 0;
    // A publish preempted on a busy host: wall time, no CPU.
    const { membership, published } = await joined(undefined, () => blockWithoutCpu(stallMs));
    expect(published).toHaveLength(1);

    stallMs = 60; // this publication takes 60 ms of wall time and next to no CPU
    membership.localChanged();
    // Within a second of the join's publication, so it waits what that one cost (cold code: it can
    // pass 0.5 ms of CPU on a busy host), at most 200 ms.
    vi.advanceTimersByTime(200);
    expect(published).toHaveLength(2);

    stallMs = 0;
    membership.localChanged(); // within the burst: waits 10 × the last publication's cost, at least 5 ms
    vi.advanceTimersByTime(100); // under wall time the wait was min(200, 10 × 60) = 200 ms
    expect(published).toHaveLength(3);
    await membership.leave();
  });

  /** Uses `ms` of this thread's CPU time. */
  function burnCpu(ms: number): void {
    const start = process.cpuUsage();
    for (;;) {
      const used = process.cpuUsage(start);
      if ((used.user + used.system) / 1000 >= ms) return;
    }
  }

  it.each([
    ['a bus of whole snapshots (IPC): ten times', false, 200],
    ['a bus of deltas (Redis): twice', true, 40],
  ])('waits within a burst %s what the last publication cost', async (_name, recordsShared, waitMs) => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    let burnMs = 0;
    const { membership, published } = await joined(recordsShared, () => burnCpu(burnMs));
    burnMs = 20; // this publication costs 20 ms of CPU
    membership.localChanged();
    vi.advanceTimersByTime(200); // the wait after the join's publication, whatever that cost
    expect(published).toHaveLength(2);
    burnMs = 0;
    membership.localChanged();
    // The cost measured is at least the 20 ms burnt (and a little more: the publication's own work).
    vi.advanceTimersByTime(waitMs * 0.9);
    expect(published).toHaveLength(2);
    vi.advanceTimersByTime(Math.min(200, waitMs * 1.5) - waitMs * 0.9);
    expect(published).toHaveLength(3);
    await membership.leave();
  });
});
