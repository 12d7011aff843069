import { engineBuiltAt } from '../lib/against.js';
import { engineMember } from '../lib/members.js';
import { against } from '../lib/options.js';
import type { LoadGroup } from '../lib/report.js';
import { HELLO } from '../lib/requests.js';
import { engineResource } from '../lib/subjects.js';

/**
 * `--against <commit>`: this checkout's engine and the one built at <commit>, one process each, the
 * same raw worker and load, in alternating rounds, so a regression in throughput or in the engine's
 * CPU per request shows in one run. The engine-CPU target (≤ 1.10 × the pinned commit's) is the
 * speed issue's budget for what features may cost on the raw path.
 */
export function againstCommit(): LoadGroup[] {
  if (against === undefined) return [];
  const old = engineBuiltAt(against);
  const short = old.sha.slice(0, 8);
  const then = engineResource(1, [{ script: 'raw-worker.mjs' }], false, [], old.bin);
  const now = engineResource(1, [{ script: 'raw-worker.mjs' }]);
  return [
    {
      kind: 'load',
      name: `regression vs ${short}`,
      resources: [then, now],
      members: {
        then: { ...engineMember(`Switchyard at ${short}, raw worker`, then, HELLO), engine: false },
        now: engineMember('Switchyard now, raw worker', now, HELLO),
      },
      order: ['then', 'now'],
      rows: [{ name: `regression vs ${short}: processes 1, raw ws worker, GET`, scenario: 'now', baseline: 'then', serverCpuTarget: 1.1 }],
    },
  ];
}
