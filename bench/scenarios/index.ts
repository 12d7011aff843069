import type { Scenario } from '../lib/report.js';
import { againstCommit } from './against.js';
import { forwarded } from './forwarded.js';
import { latency } from './latency.js';
import { oneProcess } from './one-process.js';
import { peers } from './peers.js';
import { queue } from './queue.js';
import { scaleChange } from './scale-change.js';
import { scaleMatch } from './scale-match.js';
import { scaleRoutes } from './scale-routes.js';
import { scaleWorkers } from './scale-workers.js';
import { state } from './state.js';
import { streamFanout } from './stream-fanout.js';
import { streaming } from './streaming.js';
import { telemetry } from './telemetry.js';
import { twoProcesses } from './two-processes.js';
import { twoNodesNginx } from './two-nodes-nginx.js';
import { workerFrame } from './worker-frame.js';

/**
 * Every scenario of `npm run bench`, in run order. A scenario module exports a load group (subjects
 * measured in alternation, rows pairing them with a target) or a check (its own rows): adding a
 * subject — a peer to compare with — is one module and one line here. Member ids are global (the
 * samples of a run are kept by id): every group's ids must differ from every other group's.
 */
export function scenarios(): Scenario[] {
  return [...againstCommit(), oneProcess(), latency(), peers(), workerFrame(), twoProcesses(), forwarded(), twoNodesNginx(), telemetry(), scaleRoutes, scaleMatch, scaleChange, scaleWorkers, streaming, queue, state, streamFanout];
}
