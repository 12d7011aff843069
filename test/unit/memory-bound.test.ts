// The memory bound the engine states for each process (docs/security.md#what-one-process-can-be-made-to-hold):
// computed from the config, one term per limit a restricted listener's workers can fill.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/parse-config.js';
import { MEMORY_BOUND_CONSTANTS, engineMemoryBound, primaryMemoryBound } from '../../src/workers/memory-bound.js';

const MiB = 1024 * 1024;
const c = MEMORY_BOUND_CONSTANTS;

const workersOf = (...extra: Record<string, unknown>[]) =>
  parseConfig({
    workers: [{ name: 'iii-worker-manager', config: { port: 49199 } }, ...extra.map((config, i) => ({ name: 'iii-worker-manager', config: { port: 49300 + i, ...config } }))],
  }).workers;

describe('engineMemoryBound', () => {
  it('without a restricted listener: the process and the GC allowance only (trusted workers add what they use)', () => {
    const bound = engineMemoryBound(workersOf(), 4);
    expect(bound.bytes).toBe(c.processBytes + c.gcAllowanceBytes);
    expect(bound.perProcessBytes).toBe(0);
  });

  it('one rbac listener at its defaults: each term from its limits, registrations per process of the cluster', () => {
    const bound = engineMemoryBound(workersOf({ rbac: { expose_functions: [] } }), 4);
    expect(bound.terms).toEqual({
      process: c.processBytes,
      gcAllowance: c.gcAllowanceBytes,
      unfinishedMessages: 32 * MiB + c.readBytes,
      connections: 256 * (c.connectionBytes + c.pendingConnectionBytes),
      queues: 16 * MiB + 16 * MiB,
      calls: 16 * MiB,
      channelsInHand: 32 * 3 * 256 * 1024,
      channelBuffer: 64 * MiB,
      frameInHand: 3 * 16 * MiB,
      registrations: 4 * MiB * c.registrationParseFactor,
    });
    expect(bound.bytes).toBe(Object.values(bound.terms).reduce((a, b) => a + b, 0));
    expect(bound.perProcessBytes).toBe(MiB * c.registrationParseFactor);
    expect(bound.fixedBytes + 4 * bound.perProcessBytes).toBe(bound.bytes);
    // About 400 MiB for a cluster of four processes: the figure docs/security.md states.
    expect(Math.round(bound.bytes / MiB)).toBe(Math.round((c.processBytes + c.gcAllowanceBytes) / MiB + 32 + 8.75 + 32 + 16 + 24 + 64 + 48 + 12 + 0.0625));
  });

  it('grows with the cluster by the registrations each process holds, and with each restricted listener', () => {
    const one = workersOf({ rbac: { expose_functions: [] } });
    expect(engineMemoryBound(one, 8).bytes - engineMemoryBound(one, 4).bytes).toBe(4 * MiB * c.registrationParseFactor);
    const two = workersOf({ rbac: { expose_functions: [] } }, { rbac: { expose_functions: [] }, max_connections: 32 });
    const delta = engineMemoryBound(two, 4).bytes - engineMemoryBound(one, 4).bytes;
    // The second listener's own terms; the channel buffer and the frame in hand are the process's, once.
    expect(delta).toBe(32 * MiB + c.readBytes + 32 * (c.connectionBytes + c.pendingConnectionBytes) + 32 * MiB + 16 * MiB + 24 * MiB + 4 * MiB * c.registrationParseFactor);
  });

  it('follows the keys: an rbac listener without a registration budget holds up to the process\'s 16 MiB per process', () => {
    const tight = engineMemoryBound(workersOf({ rbac: { expose_functions: [] }, max_frame_bytes: MiB, max_queued_bytes: 4 * MiB, max_channels: 8, max_listener_registration_bytes: 256 * 1024 }), 2);
    expect(tight.terms.unfinishedMessages).toBe(2 * MiB + c.readBytes);
    expect(tight.terms.queues).toBe(4 * MiB + MiB);
    expect(tight.terms.calls).toBe(MiB);
    expect(tight.terms.frameInHand).toBe(3 * MiB);
    expect(tight.terms.registrations).toBe(2 * 256 * 1024 * c.registrationParseFactor);
    const loose = engineMemoryBound(workersOf({ rbac: { expose_functions: [] }, max_listener_registration_bytes: 64 * MiB }), 2);
    expect(loose.terms.registrations).toBe(2 * 16 * MiB * c.registrationParseFactor);
  });

  it('primaryMemoryBound: the primary and the restricted registrations of the snapshots it keeps', () => {
    const workers = workersOf({ rbac: { expose_functions: [] } });
    expect(primaryMemoryBound(workers, 2).bytes).toBe(c.primaryBytes + c.gcAllowanceBytes + 2 * MiB * c.registrationParseFactor);
    expect(primaryMemoryBound(workersOf(), 2).bytes).toBe(c.primaryBytes + c.gcAllowanceBytes);
  });
});
