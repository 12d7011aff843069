import { baselineMember, engineMember, forcedForwardMember } from '../lib/members.js';
import type { LoadGroup } from '../lib/report.js';
import { HELLO } from '../lib/requests.js';
import { baselineResource, engineResource } from '../lib/subjects.js';

/** Two processes, the worker on one: every request forwarded (4), and connections dealt by node:cluster (5). */
export function forwarded(): LoadGroup {
  const b4 = baselineResource('4-relay.mjs');
  const b5 = baselineResource('5-cluster-half.mjs');
  const sy2one = engineResource(2, [{ script: 'raw-worker.mjs' }]);
  return {
    kind: 'load',
    name: 'two processes, one worker',
    resources: [b4, b5, sy2one],
    members: {
      b4: baselineMember('(4) relay, every request', b4, HELLO),
      sy2fwd: forcedForwardMember('Switchyard, all forwarded', sy2one, HELLO),
      b5: baselineMember('(5) cluster, half relayed', b5, HELLO),
      sy2half: engineMember('Switchyard, half forwarded', sy2one, HELLO, true),
    },
    order: ['b4', 'sy2fwd', 'b5', 'sy2half'],
    rows: [
      { name: 'processes 2, worker on one child, every request forwarded', scenario: 'sy2fwd', baseline: 'b4', target: 0.85, forwarded: true },
      { name: 'processes 2, worker on one child, connections dealt by node:cluster (half forwarded)', scenario: 'sy2half', baseline: 'b5', target: 0.85, forwarded: true },
    ],
  };
}
