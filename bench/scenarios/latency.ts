import { baselineMember, engineMember } from '../lib/members.js';
import type { LoadGroup } from '../lib/report.js';
import { HELLO } from '../lib/requests.js';
import { baselineResource, engineResource } from '../lib/subjects.js';

const ONE_AT_A_TIME = { ...HELLO, connections: 1 };

/**
 * One request at a time (one keep-alive connection, closed loop): what the engine adds to a single
 * request's latency over baseline (2), the node:http + ws worker hop. Target: p50 at most 30 µs over
 * (2). (iii publishes about 527 µs per request one at a time for v0.22.1 on its CI runner.)
 */
export function latency(): LoadGroup {
  const b2 = baselineResource('2-ws-worker.mjs');
  // The worker as shipped on both sides (OpenTelemetry on), as the Switchyard subject runs it.
  const b2sdk = baselineResource('2-ws-worker.mjs', { WORKER: 'sdk', WORKER_OTEL: 'true' });
  const sy = engineResource(1, [{ script: 'raw-worker.mjs' }]);
  const sySdk = engineResource(1, [{ script: 'sdk-worker.mjs', env: { OTEL_ENABLED: 'true' } }]);
  return {
    kind: 'load',
    name: 'one at a time',
    resources: [b2, b2sdk, sy, sySdk],
    members: {
      oneB2: baselineMember('(2) http + ws worker, 1 connection', b2, ONE_AT_A_TIME),
      oneSy: engineMember('Switchyard, raw worker, 1 connection', sy, ONE_AT_A_TIME),
      oneB2sdk: baselineMember('(2) with iii-sdk worker as shipped, 1 connection', b2sdk, ONE_AT_A_TIME),
      oneSySdk: engineMember('Switchyard, iii-sdk worker as shipped, 1 connection', sySdk, ONE_AT_A_TIME),
    },
    order: ['oneB2', 'oneSy', 'oneB2sdk', 'oneSySdk'],
    rows: [
      { name: 'latency: one request at a time, raw ws worker, against (2)', scenario: 'oneSy', baseline: 'oneB2', p50OverUs: 30 },
      { name: 'info: latency one at a time, iii-sdk worker as shipped, against (2) with iii-sdk worker', scenario: 'oneSySdk', baseline: 'oneB2sdk' },
    ],
  };
}
