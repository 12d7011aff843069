import { engineMember } from '../lib/members.js';
import type { LoadGroup } from '../lib/report.js';
import { HELLO } from '../lib/requests.js';
import { engineResource } from '../lib/subjects.js';

/**
 * What an iii-sdk worker's default telemetry costs when the engine samples 10 % of traces at the edge
 * (docs/observability.md): the same engine and worker with the SDK's OpenTelemetry on (spans, metrics
 * and logs to the engine's /otel) against off. Unsampled requests carry flag 00, so the SDK records
 * no span for them. Target: total CPU per request (engine + worker) within 1.15 times.
 */
export function telemetry(): LoadGroup {
  const observability = [{ name: 'iii-observability', config: { enabled: true, sampling_ratio: 0.1, exporter: 'memory' } }];
  const off = engineResource(1, [{ script: 'sdk-worker.mjs' }], false, observability);
  const on = engineResource(1, [{ script: 'sdk-worker.mjs', env: { OTEL_ENABLED: 'true' } }], false, observability);
  const all = engineResource(1, [{ script: 'sdk-worker.mjs', env: { OTEL_ENABLED: 'true' } }], false, [
    { name: 'iii-observability', config: { enabled: true, sampling_ratio: 1, exporter: 'memory' } },
  ]);
  return {
    kind: 'load',
    name: 'telemetry',
    resources: [off, on, all],
    members: {
      off: engineMember('Switchyard, iii-sdk worker, OTEL_ENABLED=false', off, HELLO),
      on: engineMember('Switchyard, iii-sdk worker, default telemetry, sampling_ratio 0.1', on, HELLO),
      all: engineMember('Switchyard, iii-sdk worker, default telemetry, sampling_ratio 1', all, HELLO),
    },
    order: ['off', 'on', 'all'],
    rows: [
      { name: 'telemetry: iii-sdk default telemetry at sampling_ratio 0.1 against telemetry off', scenario: 'on', baseline: 'off', cpuTarget: 1.15 },
      { name: 'info: every request sampled (sampling_ratio 1) against telemetry off', scenario: 'all', baseline: 'off' },
    ],
  };
}
