import { baselineMember, baselinePids, engineMember, engineSetupPids, onOneCpu } from '../lib/members.js';
import type { LoadGroup } from '../lib/report.js';
import { HELLO } from '../lib/requests.js';
import { baselineResource, engineResource } from '../lib/subjects.js';

const ONE_AT_A_TIME = { ...HELLO, connections: 1 };

/**
 * One request at a time (one keep-alive connection, closed loop): what the engine adds to a single
 * request's latency over baseline (2), the node:http + ws worker hop. Target: p50 at most 30 µs over
 * (2). (iii publishes about 527 µs per request one at a time for v0.22.1 on its CI runner.)
 *
 * The target's row runs the load generator, the server and the worker of each subject on one CPU.
 * On two CPUs every hop may wake a process on the other, idle CPU, and on virtual machines whose idle
 * CPUs halt at once (no halt polling) that wake-up costs more than the servers' own work; whether the
 * scheduler wakes a process there or on the writer's CPU changes from run to run, for (2) as much as
 * for the engine (docs/performance.md, "One at a time: what the row measures"). On one CPU every hop
 * is a switch on the same CPU, so the difference is the servers' work: the engine's work after it
 * sends a frame or a reply competes with the process it woke. The same pair on both CPUs is printed
 * beside it as info.
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
      oneB2: onOneCpu(baselineMember('(2) http + ws worker, 1 connection', b2, ONE_AT_A_TIME), b2, baselinePids),
      oneSy: onOneCpu(engineMember('Switchyard, raw worker, 1 connection', sy, ONE_AT_A_TIME), sy, engineSetupPids),
      oneB2sdk: onOneCpu(baselineMember('(2) with iii-sdk worker as shipped, 1 connection', b2sdk, ONE_AT_A_TIME), b2sdk, baselinePids),
      oneSySdk: onOneCpu(engineMember('Switchyard, iii-sdk worker as shipped, 1 connection', sySdk, ONE_AT_A_TIME), sySdk, engineSetupPids),
      oneB2Cpus: baselineMember('(2) http + ws worker, 1 connection, all CPUs', b2, ONE_AT_A_TIME),
      oneSyCpus: engineMember('Switchyard, raw worker, 1 connection, all CPUs', sy, ONE_AT_A_TIME),
    },
    order: ['oneB2', 'oneSy', 'oneB2sdk', 'oneSySdk', 'oneB2Cpus', 'oneSyCpus'],
    rows: [
      { name: 'latency: one request at a time (one CPU), raw ws worker, against (2)', scenario: 'oneSy', baseline: 'oneB2', p50OverUs: 30 },
      { name: 'info: latency one at a time (one CPU), iii-sdk worker as shipped, against (2) with iii-sdk worker', scenario: 'oneSySdk', baseline: 'oneB2sdk' },
      { name: 'info: latency one at a time on all CPUs, raw ws worker, against (2)', scenario: 'oneSyCpus', baseline: 'oneB2Cpus', p50Note: true },
    ],
  };
}
