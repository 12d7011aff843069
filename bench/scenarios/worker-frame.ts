import { baselineMember } from '../lib/members.js';
import type { LoadGroup } from '../lib/report.js';
import { HELLO } from '../lib/requests.js';
import { baselineResource } from '../lib/subjects.js';

/**
 * What an engine's frame costs the iii-sdk worker (issue 26, point 3). Baseline (2) with the iii-sdk
 * worker as shipped (OpenTelemetry on, unsampled trace context), sending the handler's request object
 * in three shapes (FRAME in bench/baselines/common.mjs): every member Switchyard sends, the same
 * without the two channel refs, and the ApiRequest's own members with the refs but without
 * Switchyard's extensions (`request_id`, `ip`, the request id header); and Switchyard's frame to a
 * worker started with III_DISABLE_TRACE_PAYLOADS=1 (the SDK's switch for the span payload it
 * serialises on every call, channel objects included). With the worker's OpenTelemetry off, as issue
 * 26's point 2 runs it, (2)'s own frame against Switchyard's frame and traceparent. No engine: the
 * worker's CPU per request ("+ workers") is what each part of the frame costs it. No target: these
 * rows price, they do not judge.
 */
export function workerFrame(): LoadGroup {
  const sdk = { WORKER: 'sdk', WORKER_OTEL: 'true' };
  const engine = baselineResource('2-ws-worker.mjs', { ...sdk, FRAME: 'engine' });
  const noRefs = baselineResource('2-ws-worker.mjs', { ...sdk, FRAME: 'norefs' });
  const spec = baselineResource('2-ws-worker.mjs', { ...sdk, FRAME: 'spec' });
  // The worker's own switch for its span payload (iii-sdk reads it on every call).
  const noPayloads = baselineResource('2-ws-worker.mjs', { ...sdk, FRAME: 'engine', III_DISABLE_TRACE_PAYLOADS: '1' });
  // Issue 26's point-2 pairing (OpenTelemetry off, the row `local: processes 1, iii-sdk worker, GET`):
  // (2)'s own frame there carries neither the ApiRequest's path_params, trigger and context nor a
  // traceparent, all of which iii's wire has; this prices the difference with the worker as that row runs it.
  const plainOff = baselineResource('2-ws-worker.mjs', { WORKER: 'sdk' });
  const engineOff = baselineResource('2-ws-worker.mjs', { WORKER: 'sdk', FRAME: 'engine', TRACEPARENT: '1' });
  return {
    kind: 'load',
    name: 'worker frame',
    resources: [engine, noRefs, spec, noPayloads, plainOff, engineOff],
    members: {
      frameEngine: baselineMember("(2), iii-sdk worker as shipped, Switchyard's frame", engine, HELLO),
      frameNoRefs: baselineMember("(2), iii-sdk worker as shipped, Switchyard's frame without channel refs", noRefs, HELLO),
      frameSpec: baselineMember('(2), iii-sdk worker as shipped, the ApiRequest and the channel refs, no extensions', spec, HELLO),
      frameNoPayloads: baselineMember("(2), iii-sdk worker with III_DISABLE_TRACE_PAYLOADS=1, Switchyard's frame", noPayloads, HELLO),
      framePlainOff: baselineMember("(2), iii-sdk worker with OpenTelemetry off, (2)'s own frame", plainOff, HELLO),
      frameEngineOff: baselineMember("(2), iii-sdk worker with OpenTelemetry off, Switchyard's frame and traceparent", engineOff, HELLO),
    },
    order: ['frameEngine', 'frameNoRefs', 'frameSpec', 'frameNoPayloads', 'framePlainOff', 'frameEngineOff'],
    rows: [
      { name: "worker frame: the channel refs, (2) with Switchyard's frame without them against with them", scenario: 'frameNoRefs', baseline: 'frameEngine' },
      { name: "worker frame: Switchyard's extensions, (2) with the ApiRequest and refs only against Switchyard's frame", scenario: 'frameSpec', baseline: 'frameEngine' },
      { name: "worker frame: the worker's span payload switched off (III_DISABLE_TRACE_PAYLOADS=1), Switchyard's frame, against as shipped", scenario: 'frameNoPayloads', baseline: 'frameEngine' },
      { name: "worker frame: OpenTelemetry off (point 2's worker), Switchyard's frame and traceparent against (2)'s own frame", scenario: 'frameEngineOff', baseline: 'framePlainOff' },
    ],
  };
}
