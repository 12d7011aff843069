import type { ModuleContext } from './module.js';

/**
 * iii's `condition_function_id` (engine/src/condition.rs): the handler runs unless the condition
 * function answers exactly `false`; no answer counts as true; a failed call skips the handler.
 */
export async function runCondition(context: ModuleContext, conditionFunctionId: string, event: unknown): Promise<boolean> {
  const outcome = await context.invoke(conditionFunctionId, event);
  if (!outcome.ok) {
    context.triggerDropped(outcome.failure, { conditionFunctionId }, 'condition function failed; handler skipped');
    return false;
  }
  return outcome.value !== false;
}
