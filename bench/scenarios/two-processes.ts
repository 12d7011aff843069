import { baselineMember, engineMember } from '../lib/members.js';
import type { LoadGroup } from '../lib/report.js';
import { HELLO } from '../lib/requests.js';
import { baselineResource, engineResource } from '../lib/subjects.js';

/** Two processes, a worker on each, against two node:cluster processes with a worker each (3). */
export function twoProcesses(): LoadGroup {
  const b3 = baselineResource('3-cluster.mjs');
  const sy2each = engineResource(2, [{ script: 'raw-worker.mjs' }, { script: 'raw-worker.mjs' }], true);
  return {
    kind: 'load',
    name: 'two processes, a worker on each',
    resources: [b3, sy2each],
    members: {
      b3: baselineMember('(3) 2 cluster processes', b3, HELLO),
      sy2each: engineMember('Switchyard, processes 2', sy2each, HELLO, true),
    },
    order: ['b3', 'sy2each'],
    rows: [{ name: 'processes 2, a raw worker on each', scenario: 'sy2each', baseline: 'b3', target: 0.85, forwarded: true }],
  };
}
