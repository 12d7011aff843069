import { performance } from 'node:perf_hooks';
import { validateTrigger } from '../../src/routing/trigger-config.js';
import type { FunctionRecord, OwnerSnapshot, TriggerRecord } from '../../src/routing/registrations.js';
import { RouteTable } from '../../src/routing/route-table.js';
import { median } from '../lib/load.js';
import { smoke } from '../lib/options.js';
import type { CheckGroup, ScaleRow } from '../lib/report.js';

export const scaleChange: CheckGroup = { kind: 'check', name: 'scale: route change time', run: () => scaleChangeRows() };

/** Peers holding the table's routes, as in `npm run sim:scale` at N = 16 (one process per node). */
const PEERS = 16;
const SIZES = [100, 1000, 10_000];
const ROUND_MS = smoke ? 20 : 200;
const MIN_CHANGES = 4;
const MAX_CHANGES = 20_000;

/** REST-like shapes under each peer's own prefix: statics, one and two parameters. */
function routeSource(peer: number, k: number): string {
  const r = `/o${peer}/api/v1/r${k}`;
  switch (k % 4) {
    case 0:
      return r;
    case 1:
      return `${r}/:id`;
    case 2:
      return `${r}/:id/items/:itemId`;
    default:
      return `/o${peer}/svc/r${k}/status`;
  }
}

function trigger(id: string, functionId: string, apiPath: string, registeredAt: number, seq: number): TriggerRecord {
  const validated = validateTrigger('http', { api_path: apiPath, http_method: 'GET' }, false);
  if (!validated.ok) throw new Error(validated.message);
  return { ...validated.spec, id, functionId, workerId: 'w', registeredAt, seq };
}

interface Peer {
  ownerId: string;
  functions: FunctionRecord[];
  triggers: TriggerRecord[];
}

function peer(index: number, routes: number): Peer {
  const functionId = `b${index}::fn`;
  const triggers: TriggerRecord[] = [];
  for (let k = 0; k < routes; k++) triggers.push(trigger(`b${index}-${k}`, functionId, routeSource(index, k), 1000 + k, k));
  return { ownerId: `peer-${index}`, functions: [{ id: functionId, workerId: 'w', registeredAt: 1 }], triggers };
}

interface Setup {
  size: number;
  table: RouteTable;
  peers: Peer[];
  version: number;
  /** The local source's snapshot (case c). */
  local: OwnerSnapshot;
}

/**
 * A table of `size` routes: case (a)/(b) 16 remote peers holding size / 16 each (the local source
 * empty); case (c) the local source holding all of them. Built once; the timed changes follow.
 */
function setup(size: number, allLocal: boolean): Setup {
  const peers = Array.from({ length: PEERS }, (_, i) => peer(i, allLocal ? 0 : Math.ceil(size / PEERS)));
  const whole = peer(99, allLocal ? size : 0);
  const table = new RouteTable(false);
  const state: Setup = { size, table, peers, version: 1, local: { ownerId: 'local', version: 1, functions: whole.functions, triggers: whole.triggers } };
  table.setLocalSource({ ownerId: 'local', snapshot: () => state.local });
  for (const p of peers) table.applySnapshot({ ownerId: p.ownerId, version: 1, functions: p.functions, triggers: p.triggers });
  if (table.current().router.size !== (allLocal ? size : PEERS * Math.ceil(size / PEERS))) throw new Error('table not built');
  return state;
}

/**
 * CPU µs per change in one round (this process's CPU time, so that time the shared machine gives to
 * others does not count): each change one route added or removed (in turn) and the table read
 * (`current()`: what a request or the scheduled rebuild does next), for at least ROUND_MS of wall time
 * and MIN_CHANGES changes.
 */
function timeRound(s: Setup, change: (s: Setup, add: boolean) => void): number {
  const start = performance.now();
  const cpu = process.cpuUsage();
  let count = 0;
  while (count < MIN_CHANGES || (performance.now() - start < ROUND_MS && count < MAX_CHANGES)) {
    change(s, count % 2 === 0);
    s.table.current();
    count++;
  }
  const used = process.cpuUsage(cpu);
  return (used.user + used.system) / count;
}

const extra = trigger('probe-0', 'probe::fn', '/probe/0', 5000, 0);
const probeFunctions: FunctionRecord[] = [{ id: 'probe::fn', workerId: 'w', registeredAt: 5000 }];

/** (a) A small peer (a worker of its own on another process) registers and drops one route. */
function smallPeerChange(s: Setup, add: boolean): void {
  s.version++;
  s.table.applySnapshot({ ownerId: 'probe', version: s.version, functions: probeFunctions, triggers: add ? [extra] : [] });
}

/** (b) One of the 16 peers holding size / 16 routes adds and drops one (a new snapshot of the same records + 1, as the bus hands it). */
function bigPeerChange(s: Setup): (s: Setup, add: boolean) => void {
  const p = s.peers[0] as Peer;
  const withExtra = [...p.triggers, extra];
  return (_s, add) => {
    s.version++;
    s.table.applySnapshot({ ownerId: p.ownerId, version: s.version, functions: add ? [...p.functions, ...probeFunctions] : p.functions, triggers: add ? withExtra : p.triggers });
  };
}

/** (c) One process holds every route (its local source) and one of its workers adds and drops one. */
function localChange(s: Setup): (s: Setup, add: boolean) => void {
  const base = s.local;
  const withExtra: OwnerSnapshot = { ...base, functions: [...base.functions, ...probeFunctions], triggers: [...base.triggers, extra] };
  return (_s, add) => {
    s.version++;
    s.local = { ...(add ? withExtra : base), version: s.version };
    s.table.markChanged();
  };
}

/**
 * (e) Work per route change in one process, in process: a table of 100 / 1,000 / 10,000 routes,
 * one route registered or dropped, then the table read. The target is the cluster case (a): a change
 * of one peer costs the same whatever the other peers hold. (b) and (c) are shown beside it: a change
 * of a peer that itself holds many routes, and of one process holding them all.
 */
export function scaleChangeRows(): ScaleRow[] {
  // Every table first, then rounds that visit each size and case in turn (the first round is warm-up):
  // the garbage collector's work after building a large table, and drift of the machine, hit all alike.
  const cases = SIZES.map((size) => {
    const remote = setup(size, false);
    const local = setup(size, true);
    return [
      { s: remote, change: smallPeerChange },
      { s: remote, change: bigPeerChange(remote) },
      { s: local, change: localChange(local) },
    ];
  });
  const samples = cases.map((row) => row.map(() => [] as number[]));
  for (let round = 0; round < 6; round++) {
    cases.forEach((row, i) =>
      row.forEach(({ s, change }, j) => {
        const us = timeRound(s, change);
        if (round > 0) samples[i]?.[j]?.push(us);
      }),
    );
  }
  const column = (j: number): number[] => samples.map((row) => median(row[j] ?? []));
  const [a, b, c] = [column(0), column(1), column(2)] as [number[], number[], number[]];
  const list = (values: number[]): string => values.map((v) => `${v < 10 ? v.toFixed(1) : v.toFixed(0)} µs`).join(' / ');
  const ratio = (values: number[]): string => ((values[2] as number) / (values[0] as number)).toFixed(2);
  return [
    {
      check: '(e) route change time, 100 / 1,000 / 10,000 routes on 16 peers (in process; one route added or dropped, then the table read)',
      result:
        `(a) a change of another peer: ${list(a)} per change, 10,000 ÷ 100 = ${ratio(a)}; ` +
        `(b) a change of a peer holding 1/16 of the routes: ${list(b)}, ÷ ${ratio(b)}; ` +
        `(c) one process holding every route: ${list(c)}, ÷ ${ratio(c)}`,
      target: 'flat: (a) ÷ ≤ 2',
      pass: (a[2] as number) / (a[0] as number) <= 2,
    },
  ];
}
