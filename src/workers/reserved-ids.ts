/**
 * `engine::` function ids belong to the engine (docs/security.md#limits): a worker cannot register
 * one, so it cannot shadow an engine function, take its calls, or bind a route to a name the engine
 * answers. The one exception list: ids iii lets an external worker provide, which a worker may
 * register only while the engine serves no function of that id itself (its own module for it is not
 * enabled). iii reserves nothing (engine/src/engine/mod.rs, the RegisterFunction arm): docs/compatibility.md.
 */
export const ENGINE_PREFIX = 'engine::';

/** Engine ids a worker may provide when the engine does not: iii's queue worker provides `engine::queue::enqueue`. */
export const WORKER_PROVIDABLE_ENGINE_IDS: ReadonlySet<string> = new Set(['engine::queue::enqueue']);

/** Why a worker may not register `id`, or undefined when it may. `engineServes`: whether the engine has a function of that id. */
export function reservedIdProblem(id: string, engineServes: (id: string) => boolean): string | undefined {
  if (!id.startsWith(ENGINE_PREFIX)) return undefined;
  if (!WORKER_PROVIDABLE_ENGINE_IDS.has(id)) return `'${ENGINE_PREFIX}' function ids are reserved for the engine`;
  if (engineServes(id)) return `the engine provides '${id}' itself (its module is enabled)`;
  return undefined;
}
