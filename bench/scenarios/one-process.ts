import { baselineMember, engineMember } from '../lib/members.js';
import type { LoadGroup } from '../lib/report.js';
import { BODY_1K, BODY_64K, HELLO } from '../lib/requests.js';
import { baselineResource, engineResource } from '../lib/subjects.js';

/** One engine process against (1), (2) and its variants: raw and iii-sdk workers, bodies, middleware. */
export function oneProcess(): LoadGroup {
  const b1 = baselineResource('1-http.mjs');
  const b2 = baselineResource('2-ws-worker.mjs');
  const b2sdk = baselineResource('2-ws-worker.mjs', { WORKER: 'sdk' });
  const b2mw = baselineResource('2-ws-worker.mjs', { MIDDLEWARE: '1' });
  const sy1 = engineResource(1, [{ script: 'raw-worker.mjs' }]);
  const sy1sdk = engineResource(1, [{ script: 'sdk-worker.mjs' }]);
  const sy1mw = engineResource(1, [{ script: 'raw-worker.mjs', env: { MIDDLEWARE: '1' } }]);
  // Bodies get processes of their own: after 64 KiB bodies a process's heap is larger, which would
  // colour the GET measurements of a process shared with them.
  const b2body = baselineResource('2-ws-worker.mjs');
  const sy1body = engineResource(1, [{ script: 'raw-worker.mjs' }]);
  return {
    kind: 'load',
    name: 'one process',
    resources: [b1, b2, b2sdk, b2mw, sy1, sy1sdk, sy1mw, b2body, sy1body],
    members: {
      b1: baselineMember('(1) node:http hello', b1, HELLO),
      b2: baselineMember('(2) http + ws worker', b2, HELLO),
      b2sdk: baselineMember('(2) with iii-sdk worker', b2sdk, HELLO),
      sy1: engineMember('Switchyard, raw worker', sy1, HELLO),
      sy1sdk: engineMember('Switchyard, iii-sdk worker', sy1sdk, HELLO),
      sy1mw: engineMember('Switchyard + 3 middleware', sy1mw, HELLO),
      b2mw: baselineMember('(2) + round trips of 3 middleware', b2mw, HELLO),
      b2k1: baselineMember('(2), 1 KiB body', b2body, BODY_1K),
      sy1k1: engineMember('Switchyard, 1 KiB body', sy1body, BODY_1K),
      b2k64: baselineMember('(2), 64 KiB body', b2body, BODY_64K),
      sy1k64: engineMember('Switchyard, 64 KiB body', sy1body, BODY_64K),
    },
    order: ['b1', 'b2', 'sy1', 'sy1mw', 'b2mw', 'b2sdk', 'sy1sdk', 'b2k1', 'sy1k1', 'b2k64', 'sy1k64'],
    rows: [
      // Issue 26: the plain path at 0.95 of its limit (2), and with the shipped SDK worker at 0.97 of the
      // same worker behind (2) (the worker, not the engine, bounds that row).
      { name: 'local: processes 1, raw ws worker, GET', scenario: 'sy1', baseline: 'b2', target: 0.95 },
      { name: 'local: processes 1, iii-sdk worker, GET', scenario: 'sy1sdk', baseline: 'b2sdk', target: 0.97 },
      { name: 'local: 1 KiB JSON body echoed (POST)', scenario: 'sy1k1', baseline: 'b2k1', target: 0.85 },
      { name: 'local: 64 KiB JSON body echoed (POST)', scenario: 'sy1k64', baseline: 'b2k64', target: 0.85 },
      { name: 'local: 3 middleware in scope (onRequest, preHandler, postHandler)', scenario: 'sy1mw', baseline: 'sy1', middlewares: 3 },
      { name: 'local: 3 middleware against the same round trips in (2)', scenario: 'sy1mw', baseline: 'b2mw', target: 0.85 },
      { name: 'info: the limit for middleware, (2) with the round trips of 3 middleware against (2)', scenario: 'b2mw', baseline: 'b2', middlewareNote: 3 },
      { name: 'info: baseline (2) against (1), the cost of the worker hop', scenario: 'b2', baseline: 'b1' },
      { name: 'info: iii-sdk cost, baseline (2) with iii-sdk worker against raw worker', scenario: 'b2sdk', baseline: 'b2' },
      { name: 'info: iii-sdk cost, Switchyard with iii-sdk worker against raw worker', scenario: 'sy1sdk', baseline: 'sy1' },
    ],
  };
}
