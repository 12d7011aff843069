import { changedSpan } from '../values.js';
import { ChurnMap } from './churn-map.js';
import type { DepartedWorker, FunctionRecord, OwnerSnapshot, TriggerRecord } from './registrations.js';

export type HttpTrigger = TriggerRecord & { type: 'http' };
export type MiddlewareTrigger = TriggerRecord & { type: 'http_middleware' };

const isMiddleware = (trigger: TriggerRecord): trigger is MiddlewareTrigger => trigger.type === 'http_middleware';

/**
 * The route slot a binding competes for: its method and path shape (`GET /users/:`), made with the
 * record when its config was validated (a per-record WeakMap lookup before: 2.5 % of a 32-node
 * simulation node's CPU, a cache miss on every change).
 */
export function routeKey(trigger: HttpTrigger): string {
  return trigger.http.routeKey;
}

/** What a change of one owner's snapshot touched: the table recomputes these and nothing else. */
export interface Touched {
  /** Route keys whose bindings from this owner changed (live or departed). */
  keys: Set<string>;
  /** Function ids whose registrations or departed claims from this owner changed. */
  functions: Set<string>;
  /** Function ids whose departed workers' triggers from this owner changed (reconnect grace). */
  departedFunctions: Set<string>;
  /** This owner's middleware bindings changed. */
  middleware: boolean;
}

export const nothingTouched = (): Touched => ({ keys: new Set(), functions: new Set(), departedFunctions: new Set(), middleware: false });

const NONE: readonly never[] = Object.freeze([]);

function push<K, V>(map: Map<K, V[]> | ChurnMap<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}

/** Removes one occurrence of `value`, which the list holds (a record of the snapshot indexed before). */
function pull<K, V>(map: ChurnMap<K, V[]>, key: K, value: V): void {
  const list = map.get(key) as V[];
  list.splice(list.indexOf(value), 1);
  if (list.length === 0) map.delete(key);
}

/**
 * What changed between two lists of records: everything between their longest common head and tail
 * (compared by identity). An append, a removal or a replacement of records lying together — what a
 * worker's registration, a departure or a delta does to an owner's lists — costs a walk of pointer
 * comparisons and no allocation. The records in between are reported removed and added even when some
 * are the same on both sides: reporting more than changed is safe (those keys are recomputed, to the
 * same result), reporting less never happens.
 */
function changed<T>(before: readonly T[], after: readonly T[], removed: (record: T) => void, added: (record: T) => void): void {
  const { head, endBefore, endAfter } = changedSpan(before, after);
  for (let i = head; i < endBefore; i++) removed(before[i] as T);
  for (let i = head; i < endAfter; i++) added(after[i] as T);
}

/**
 * One owner's registrations indexed the way the table merges them: http bindings by route key,
 * function records and departed claims by function id, middleware apart. `update` compares the new
 * snapshot with the one indexed (records by identity: the bus and the worker hub hand on the same
 * record objects for what did not change) and re-indexes only what changed, telling the table which
 * keys and functions to recompute. An owner's bindings of one route key are kept in no particular
 * order (the table orders a key's bindings by age, and one owner's never tie: each has its own
 * sequence number); its records of one function id are kept in snapshot order (the first held
 * replica's metadata is the function's).
 */
export class OwnerIndex {
  private indexed: OwnerSnapshot | undefined;
  /** Connected workers' http bindings by route key. */
  readonly live = new ChurnMap<string, HttpTrigger[]>();
  /** Departed workers' http bindings by route key. */
  departed = new Map<string, HttpTrigger[]>();
  /** Function records by id. */
  readonly functions = new ChurnMap<string, FunctionRecord[]>();
  /** Departed workers whose `functionIds` name the function, by id. */
  claims = new Map<string, DepartedWorker[]>();
  /** Departed workers' triggers (any type) by function id. */
  departedTriggers = new Map<string, TriggerRecord[]>();
  readonly liveMiddleware: MiddlewareTrigger[] = [];
  departedMiddleware: readonly MiddlewareTrigger[] = NONE;

  /** `rank`: the owner's place in the table's order (older owners first, the local process last). */
  constructor(
    readonly ownerId: string,
    public rank: number,
  ) {}

  /** Indexes `next` (undefined: the owner is gone) and adds what changed to `touched`. */
  update(next: OwnerSnapshot | undefined, touched: Touched): void {
    const previous = this.indexed;
    if (next === previous) return;
    this.indexed = next;
    const triggers = next?.triggers ?? NONE;
    const triggersBefore = previous?.triggers ?? NONE;
    if (triggers !== triggersBefore) this.updateTriggers(triggersBefore, triggers, touched);
    const functions = next?.functions ?? NONE;
    const functionsBefore = previous?.functions ?? NONE;
    if (functions !== functionsBefore) this.updateFunctions(functionsBefore, functions, touched);
    const departed = next?.departed ?? NONE;
    const departedBefore = previous?.departed ?? NONE;
    if (departed !== departedBefore) this.updateDeparted(departedBefore, departed, touched);
  }

  hasKey(key: string): boolean {
    return this.live.has(key) || this.departed.has(key);
  }

  hasFunction(id: string): boolean {
    return this.functions.has(id) || this.claims.has(id);
  }

  private updateTriggers(before: readonly TriggerRecord[], after: readonly TriggerRecord[], touched: Touched): void {
    changed(
      before,
      after,
      (trigger) => {
        if (isMiddleware(trigger)) {
          this.liveMiddleware.splice(this.liveMiddleware.indexOf(trigger), 1);
          touched.middleware = true;
          return;
        }
        const key = routeKey(trigger);
        pull(this.live, key, trigger);
        touched.keys.add(key);
      },
      (trigger) => {
        if (isMiddleware(trigger)) {
          this.liveMiddleware.push(trigger);
          touched.middleware = true;
          return;
        }
        const key = routeKey(trigger);
        push(this.live, key, trigger);
        touched.keys.add(key);
      },
    );
  }

  private updateFunctions(before: readonly FunctionRecord[], after: readonly FunctionRecord[], touched: Touched): void {
    const ids = new Set<string>();
    changed(
      before,
      after,
      (fn) => {
        pull(this.functions, fn.id, fn);
        ids.add(fn.id);
      },
      (fn) => {
        push(this.functions, fn.id, fn);
        ids.add(fn.id);
      },
    );
    // Several records of one id here (replicas in two workers of this process): their snapshot order
    // decides whose metadata is shown, so those lists are rebuilt in that order.
    const reordered = new Set<string>();
    for (const id of ids) {
      touched.functions.add(id);
      if ((this.functions.get(id)?.length ?? 0) > 1) reordered.add(id);
    }
    if (reordered.size === 0) return;
    for (const id of reordered) this.functions.delete(id);
    for (const fn of after) if (reordered.has(fn.id)) push(this.functions, fn.id, fn);
  }

  /** Departed workers last only the reconnect grace: their index is rebuilt whole when they change. */
  private updateDeparted(before: readonly DepartedWorker[], after: readonly DepartedWorker[], touched: Touched): void {
    const note = (gone: DepartedWorker): void => {
      for (const id of gone.functionIds) {
        touched.functions.add(id);
        touched.departedFunctions.add(id);
      }
      for (const trigger of gone.triggers) {
        touched.departedFunctions.add(trigger.functionId);
        if (isMiddleware(trigger)) touched.middleware = true;
        else touched.keys.add(routeKey(trigger));
      }
    };
    changed(before, after, note, note);
    this.departed = new Map();
    this.claims = new Map();
    this.departedTriggers = new Map();
    const middleware: MiddlewareTrigger[] = [];
    for (const gone of after) {
      for (const id of gone.functionIds) push(this.claims, id, gone);
      for (const trigger of gone.triggers) {
        push(this.departedTriggers, trigger.functionId, trigger);
        if (isMiddleware(trigger)) middleware.push(trigger);
        else push(this.departed, routeKey(trigger), trigger);
      }
    }
    this.departedMiddleware = middleware;
  }
}
