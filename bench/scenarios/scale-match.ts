import { performance } from 'node:perf_hooks';
import { parsePathPattern } from '../../src/routing/path-pattern.js';
import type { RouteTarget } from '../../src/routing/router.js';
import { Router } from '../../src/routing/router.js';
import { median } from '../lib/load.js';
import { MATCH_ITERATIONS } from '../lib/options.js';
import type { CheckGroup, ScaleRow } from '../lib/report.js';

export const scaleMatch: CheckGroup = { kind: 'check', name: 'scale: route match time', run: () => scaleMatchRows() };

interface BenchRoute extends RouteTarget {
  path: string;
}

/** Route shapes of a REST service: statics, one and two parameters, a second namespace. */
function routeSource(k: number): string {
  const r = `r${k}`;
  switch (k % 4) {
    case 0:
      return `/api/v1/${r}`;
    case 1:
      return `/api/v1/${r}/:id`;
    case 2:
      return `/api/v1/${r}/:id/items/:itemId`;
    default:
      return `/svc/${r}/status`;
  }
}

interface MatchRequest {
  method: string;
  path: string;
}

/**
 * 4 096 requests on the first `distinct` routes: three in four hit a route (parameters filled), one
 * in four misses in one of three ways (unknown segment, dead end after a parameter, wrong method).
 */
function matchRequests(routes: BenchRoute[], distinct: number): MatchRequest[] {
  const requests: MatchRequest[] = [];
  for (let i = 0; i < 4096; i++) {
    const k = (i * 7919) % distinct;
    const route = routes[k] as BenchRoute;
    if (i % 4 !== 3) requests.push({ method: route.method, path: route.path.replace(':id', String(i % 97)).replace(':itemId', 'x9') });
    else if (i % 3 === 0) requests.push({ method: 'GET', path: `/api/v1/none${k}` });
    else if (i % 3 === 1) requests.push({ method: 'GET', path: `/api/v1/r${k}/1/unknown` });
    else requests.push({ method: 'DELETE', path: route.path.replace(':id', '1').replace(':itemId', '2') });
  }
  return requests;
}

interface MatchSetup {
  size: number;
  router: Router<BenchRoute>;
  buildMs: number;
  /** The same requests for every size: routes 0–9 exist in every table. */
  same: MatchRequest[];
  /** Requests spread over all of this table's routes. */
  spread: MatchRequest[];
}

function matchSetup(size: number): MatchSetup {
  const routes: BenchRoute[] = [];
  for (let k = 0; k < size; k++) {
    const parsed = parsePathPattern(routeSource(k), false);
    if (!parsed.ok) throw new Error(parsed.message);
    routes.push({ method: k % 5 === 4 ? 'POST' : 'GET', pattern: parsed.pattern, path: routeSource(k) });
  }
  const buildStart = performance.now();
  const router = new Router(routes, false);
  const buildMs = performance.now() - buildStart;
  return { size, router, buildMs, same: matchRequests(routes, 10), spread: matchRequests(routes, size) };
}

/** ns per match of `requests` on `router`, over `iterations` matches. */
function timeMatches(router: Router<BenchRoute>, requests: MatchRequest[], iterations: number): number {
  let hits = 0;
  const start = performance.now();
  for (let i = 0; i < iterations; i++) {
    const r = requests[i & 4095] as MatchRequest;
    if (router.match(r.method, r.path).kind === 'matched') hits++;
  }
  const ns = ((performance.now() - start) * 1e6) / iterations;
  if (hits === 0) throw new Error('no route matched');
  return ns;
}

/**
 * (b) Route match time for 10, 1 000 and 10 000 routes, in process (src/routing/router.ts). The
 * target compares the same requests on tables of each size (what the size itself costs); requests
 * spread over every route of the table are shown beside it (they add the cost of a working set that
 * no longer fits the CPU caches, which any table of that many routes pays).
 */
function scaleMatchRows(): ScaleRow[] {
  const setups = [10, 1000, 10_000].map(matchSetup);
  for (const setup of setups) {
    timeMatches(setup.router, setup.same, MATCH_ITERATIONS / 4);
    timeMatches(setup.router, setup.spread, MATCH_ITERATIONS / 4);
  }
  // Sizes take turns, three rounds, medians: drift of the machine hits every size alike.
  const same = setups.map(() => [] as number[]);
  const spread = setups.map(() => [] as number[]);
  for (let round = 0; round < 3; round++) {
    setups.forEach((setup, i) => {
      same[i]?.push(timeMatches(setup.router, setup.same, MATCH_ITERATIONS));
      spread[i]?.push(timeMatches(setup.router, setup.spread, MATCH_ITERATIONS));
    });
  }
  const sameNs = same.map(median);
  const spreadNs = spread.map(median);
  const ratio = (sameNs[2] as number) / (sameNs[0] as number);
  const spreadRatio = (spreadNs[2] as number) / (spreadNs[0] as number);
  const list = (values: number[]): string => values.map((v) => `${v.toFixed(0)} ns`).join(' / ');
  return [
    {
      check: '(b) route match time, 10 / 1,000 / 10,000 routes (in process; 75 % hits, 25 % misses)',
      result:
        `same requests on each table: ${list(sameNs)} per match, 10,000 ÷ 10 = ${ratio.toFixed(2)}; ` +
        `requests spread over all routes: ${list(spreadNs)}, ÷ ${spreadRatio.toFixed(2)} (cache misses of a large working set); ` +
        `router build for 10,000 routes ${(setups[2] as MatchSetup).buildMs.toFixed(1)} ms`,
      target: 'flat: same requests ÷ ≤ 1.5',
      pass: ratio <= 1.5,
    },
  ];
}
