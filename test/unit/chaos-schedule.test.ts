import { describe, expect, it } from 'vitest';
import { FAULT_KINDS, GAP_MS, HOLD_MS, PLANNED_CONVERGENCE_MS, generateSchedule, prng, seedFrom } from '../../chaos/faults.js';

const topology = { nodes: 2, childrenPerNode: 2, replicasPerNode: 2 };

describe('chaos schedule', () => {
  it('is the same for the same seed and differs for another', () => {
    const a = generateSchedule(42, 120, topology);
    expect(generateSchedule(42, 120, topology)).toEqual(a);
    expect(generateSchedule(43, 120, topology)).not.toEqual(a);
    expect(a.length).toBeGreaterThan(10);
  });

  it('draws every kind once per round of four, targets inside the topology, durations in range', () => {
    const faults = generateSchedule(7, 300, topology);
    for (let i = 0; i + FAULT_KINDS.length <= faults.length; i += FAULT_KINDS.length) {
      const round = faults.slice(i, i + FAULT_KINDS.length).map((f) => f.kind);
      expect([...round].sort()).toEqual([...FAULT_KINDS].sort());
    }
    faults.forEach((f, index) => {
      expect(f.index).toBe(index);
      expect(f.node).toBeGreaterThanOrEqual(0);
      expect(f.node).toBeLessThan(topology.nodes);
      expect(f.member).toBeLessThan(f.kind === 'kill-child' ? topology.childrenPerNode : topology.replicasPerNode);
      expect(f.gapMs).toBeGreaterThanOrEqual(GAP_MS.min);
      expect(f.gapMs).toBeLessThanOrEqual(GAP_MS.max);
      expect(f.holdMs).toBeGreaterThanOrEqual(HOLD_MS[f.kind].min);
      expect(f.holdMs).toBeLessThanOrEqual(HOLD_MS[f.kind].max);
    });
  });

  it('fits the run length, so a 20 s run still sees all four kinds', () => {
    for (const seed of [1, 2, 3, 99, 123456]) {
      const faults = generateSchedule(seed, 20, topology);
      const planned = faults.reduce((sum, f) => sum + f.gapMs + f.holdMs + PLANNED_CONVERGENCE_MS, 0);
      expect(planned).toBeLessThanOrEqual(20_000);
      expect(new Set(faults.slice(0, 4).map((f) => f.kind)).size).toBe(Math.min(4, faults.length));
      expect(faults.length).toBeGreaterThanOrEqual(4);
    }
  });

  it('refuses a topology where one worker fault could leave no replica serving', () => {
    expect(() => generateSchedule(1, 20, { nodes: 1, childrenPerNode: 2, replicasPerNode: 1 })).toThrow(/two replicas/);
  });

  it('takes numeric seeds as numbers and hashes other text', () => {
    expect(seedFrom('12345')).toBe(12345);
    expect(seedFrom('4294967297')).toBe(1);
    expect(seedFrom('nightly')).toBe(seedFrom('nightly'));
    expect(seedFrom('nightly')).not.toBe(seedFrom('nightlY'));
    const random = prng(5);
    const values = Array.from({ length: 1000 }, random);
    expect(values.every((v) => v >= 0 && v < 1)).toBe(true);
    expect(new Set(values).size).toBe(1000);
  });
});
