import { engineBuiltAt } from '../lib/against.js';
import { engineMember } from '../lib/members.js';
import { against, againstLocal } from '../lib/options.js';
import type { LoadGroup } from '../lib/report.js';
import { BODY_1K, BODY_64K, HELLO } from '../lib/requests.js';
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
    ...(againstLocal ? [localRows(old.bin, short)] : []),
  ];
}

/**
 * `--against-local`: the other local rows of the one-process group, each engine against the same
 * engine at <commit>, so "what did these features cost on the local rows" is one run's ratios (no
 * target: the row says by how much, the reader says whether that is noise). With the 64 KiB row, its
 * max RSS column is issue 26 point 6's before and after in one run (`--only KiB`).
 */
function localRows(oldBin: string, short: string): LoadGroup {
  const pair = (workers: Parameters<typeof engineResource>[1]): [ReturnType<typeof engineResource>, ReturnType<typeof engineResource>] => [
    engineResource(1, workers, false, [], oldBin),
    engineResource(1, workers),
  ];
  const [sdkThen, sdkNow] = pair([{ script: 'sdk-worker.mjs' }]);
  const [bodyThen, bodyNow] = pair([{ script: 'raw-worker.mjs' }]);
  const [body64Then, body64Now] = pair([{ script: 'raw-worker.mjs' }]);
  const [mwThen, mwNow] = pair([{ script: 'raw-worker.mjs', env: { MIDDLEWARE: '1' } }]);
  const engine = (name: string, subject: ReturnType<typeof engineResource>, spec: typeof HELLO, now: boolean) => ({
    ...engineMember(name, subject, spec),
    engine: now,
  });
  return {
    kind: 'load',
    name: `local A/B vs ${short}`,
    resources: [sdkThen, sdkNow, bodyThen, bodyNow, body64Then, body64Now, mwThen, mwNow],
    members: {
      sdkThen: engine(`Switchyard at ${short}, iii-sdk worker`, sdkThen, HELLO, false),
      sdkNow: engine('Switchyard now, iii-sdk worker', sdkNow, HELLO, true),
      bodyThen: engine(`Switchyard at ${short}, 1 KiB body`, bodyThen, BODY_1K, false),
      bodyNow: engine('Switchyard now, 1 KiB body', bodyNow, BODY_1K, true),
      body64Then: engine(`Switchyard at ${short}, 64 KiB body`, body64Then, BODY_64K, false),
      body64Now: engine('Switchyard now, 64 KiB body', body64Now, BODY_64K, true),
      mwThen: engine(`Switchyard at ${short} + 3 middleware`, mwThen, HELLO, false),
      mwNow: engine('Switchyard now + 3 middleware', mwNow, HELLO, true),
    },
    order: ['sdkThen', 'sdkNow', 'bodyThen', 'bodyNow', 'body64Then', 'body64Now', 'mwThen', 'mwNow'],
    rows: [
      { name: `local A/B vs ${short}: processes 1, iii-sdk worker, GET`, scenario: 'sdkNow', baseline: 'sdkThen' },
      { name: `local A/B vs ${short}: 1 KiB JSON body echoed (POST)`, scenario: 'bodyNow', baseline: 'bodyThen' },
      { name: `local A/B vs ${short}: 64 KiB JSON body echoed (POST)`, scenario: 'body64Now', baseline: 'body64Then' },
      { name: `local A/B vs ${short}: 3 middleware in scope`, scenario: 'mwNow', baseline: 'mwThen' },
    ],
  };
}
