import { Counter } from 'prom-client';
import type { Registry } from 'prom-client';
import { BoundedLabels } from '../observability/bounded-labels.js';
import type { TriggerDropReason } from './module.js';

/** Error codes kept as label values; later new ones count as `other`. */
const MAX_CODES = 50;

/**
 * The modules' Prometheus metrics (docs/modules.md): calls of their functions by outcome, and the
 * calls they make to workers (trigger handlers, subscribers, cron jobs) by module and outcome.
 */
export class ModuleMetrics {
  private readonly calls: Counter<'function' | 'outcome'>;
  private readonly triggers: Counter<'module' | 'outcome'>;
  private readonly drops: Counter<'module' | 'reason'>;
  private readonly codes = new BoundedLabels(MAX_CODES);

  constructor(registry: Registry) {
    const registers = [registry];
    this.calls = new Counter({
      name: 'switchyard_module_function_calls_total',
      help: 'Calls of module functions (state::set, publish, …) by function and outcome (ok, or the error code)',
      labelNames: ['function', 'outcome'],
      registers,
    });
    this.triggers = new Counter({
      name: 'switchyard_module_trigger_calls_total',
      help: 'Functions called by modules (state triggers, subscribers, cron jobs) by module and outcome',
      labelNames: ['module', 'outcome'],
      registers,
    });
    this.drops = new Counter({
      name: 'switchyard_module_trigger_drops_total',
      help: 'Trigger calls of state, stream, pubsub and cron that did not run to success, by module and reason: overflow (too many in flight, not called), no_handler (no worker serves the function), failed (error, timeout, worker gone)',
      labelNames: ['module', 'reason'],
      registers,
    });
  }

  triggerDropped(module: string, reason: TriggerDropReason): void {
    this.drops.inc({ module, reason });
  }

  functionCall(functionId: string, outcome: string): void {
    this.calls.inc({ function: functionId, outcome: outcome === 'ok' ? outcome : this.codes.label(outcome) });
  }

  triggerCall(module: string, ok: boolean): void {
    this.triggers.inc({ module, outcome: ok ? 'ok' : 'failed' });
  }
}
