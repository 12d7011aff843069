// The middleware bindings of the route table's middleware index (route-table.ts): the module config's,
// then those its owners' workers registered.
import type { MiddlewareConfig } from '../config/types.js';
import type { MiddlewareTrigger } from './owner-index.js';
import type { MiddlewareBinding } from './registrations.js';
import { isRestricted } from './principal.js';

/** RestApiModule `middleware` as the index's bindings (owner `config`), in configuration order. */
export function configBindings(configMiddleware: readonly MiddlewareConfig[]): MiddlewareBinding[] {
  return configMiddleware.map((entry, index) => ({
    triggerId: `config:${index}`,
    functionId: entry.functionId,
    ownerId: 'config',
    phase: entry.phase,
    priority: entry.priority,
    registeredAt: 0,
    seq: index,
  }));
}

/** A middleware trigger and the owner whose snapshot holds it. */
export interface MiddlewareFrom {
  trigger: MiddlewareTrigger;
  ownerId: string;
}

/** Whether two lists hold the same bindings in the same order. */
export function sameMiddleware(a: readonly MiddlewareFrom[], b: readonly MiddlewareFrom[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as MiddlewareFrom;
    const y = b[i] as MiddlewareFrom;
    // A trigger record is one owner's: the same record, the same binding.
    if (x.trigger !== y.trigger) return false;
  }
  return true;
}

/** The index's bindings: the module config's first, then each registered trigger as its owner holds it. */
export function middlewareBindings(configMiddleware: readonly MiddlewareBinding[], from: readonly MiddlewareFrom[]): MiddlewareBinding[] {
  const bindings: MiddlewareBinding[] = [...configMiddleware];
  for (const { trigger, ownerId } of from) {
    bindings.push({
      triggerId: trigger.id,
      functionId: trigger.functionId,
      ownerId,
      ...(isRestricted(trigger.principal) ? { restrictedTo: trigger.principal } : {}),
      phase: trigger.middleware.phase,
      ...(trigger.middleware.scopePath !== undefined ? { scopePath: trigger.middleware.scopePath } : {}),
      priority: trigger.middleware.priority,
      registeredAt: trigger.registeredAt,
      seq: trigger.seq,
    });
  }
  return bindings;
}
