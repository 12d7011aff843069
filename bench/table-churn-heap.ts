/**
 * What a node's route table keeps of routes that came and went (docs/scale.md, issue 28): a table of
 * 10,000 live routes (one owner) is fed, as the scale simulation's probes do, a new route of a new
 * function on a second owner, then its worker's departure, then its removal — a new path each time.
 * Prints the live heap's growth per such route after full GCs, and the dead entries each of the
 * table's ChurnMaps holds (its private fields, read here for the diagnosis only).
 *
 *   node --expose-gc --import tsx bench/table-churn-heap.ts [ROUTES_THAT_COME_AND_GO, default 4000]
 */
import { ChurnMap } from '../src/routing/churn-map.js';
import type { OwnerSnapshot, TriggerRecord } from '../src/routing/registrations.js';
import { RouteTable } from '../src/routing/route-table.js';
import { validateTrigger } from '../src/routing/trigger-config.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with node --expose-gc');
const LIVE = 10_000;
const COME_AND_GO = Number(process.argv[2] ?? 4000);

function trigger(id: string, functionId: string, path: string, registeredAt: number): TriggerRecord {
  const validated = validateTrigger('http', { api_path: path, http_method: 'GET' }, false);
  if (!validated.ok) throw new Error(validated.message);
  return { ...validated.spec, id, functionId, workerId: 'w', registeredAt, seq: 0 };
}

const table = new RouteTable(false);
const bulk: OwnerSnapshot = {
  ownerId: 'bulk',
  version: 1,
  functions: Array.from({ length: LIVE }, (_, i) => ({ id: `b${i}::fn`, workerId: 'w' })),
  triggers: Array.from({ length: LIVE }, (_, i) => trigger(`b-${i}`, `b${i}::fn`, `/b/${i}`, 1)),
};
table.applySnapshot(bulk);
table.current();

let version = 0;
/** One probe: registered, its worker gone (within the grace), then gone for good. */
function comeAndGo(k: number): void {
  const fn = `probe${k}::fn`;
  const t = trigger(`probe-${k}`, fn, `/probe/${k}`, k);
  const apply = (s: Omit<OwnerSnapshot, 'ownerId' | 'version'>): void => {
    table.applySnapshot({ ownerId: 'probes', version: ++version, ...s });
    table.current();
  };
  apply({ functions: [{ id: fn, workerId: `pw${k}` }], triggers: [t] });
  apply({ functions: [], triggers: [], departed: [{ workerId: `pw${k}`, functionIds: [fn], triggers: [t] }] });
  apply({ functions: [], triggers: [] });
}

const heap = (): number => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};
let k = 0;
for (; k < 2000; k++) comeAndGo(k); // warm-up: code compiled, maps sized
const before = heap();
for (let i = 0; i < COME_AND_GO; i++) comeAndGo(k++);
const after = heap();
console.log(`${COME_AND_GO} routes came and went beside ${LIVE} live: live heap ${((after - before) / 1024).toFixed(0)} KiB, ${((after - before) / COME_AND_GO).toFixed(0)} bytes per route`);
const held = (name: string, value: unknown): void => {
  if (value instanceof ChurnMap && value.held > value.size) console.log(`  ${name}: ${value.size} live, ${value.held - value.size} dead`);
};
for (const [name, value] of Object.entries(table)) held(`table.${name}`, value);
for (const [owner, index] of (table as unknown as { indexes: Map<string, object> }).indexes) for (const [name, value] of Object.entries(index)) held(`owner ${owner}.${name}`, value);
