import type { ModuleContext, ModuleTrigger } from '../module.js';
import { runCondition } from '../trigger-condition.js';
import type { CronSchedule } from './cron-expression.js';
import { parseCronExpression, rfc3339 } from './cron-expression.js';

/** Node clamps longer timer delays to 1 ms: a far tick is reached in steps of at most this. */
const MAX_TIMER_MS = 2_147_483_647;
/** A tick's claim outlives any handover (docs/cron.md). */
const MIN_CLAIM_MS = 60_000;

interface Job {
  trigger: ModuleTrigger;
  fingerprint: string;
  schedule: CronSchedule;
  timer: NodeJS.Timeout | undefined;
}

/**
 * The timers of the cluster's cron jobs, run only while this process holds the cron lease
 * (cron-module.ts). A tick is claimed (a lease named after the job and its scheduled time) before it
 * fires, so two processes that both believe they lead cannot fire the same tick.
 */
export class CronScheduler {
  private readonly jobs = new Map<string, Job>();
  private active = false;

  constructor(private readonly context: ModuleContext) {}

  replace(triggers: readonly ModuleTrigger[]): void {
    const seen = new Set<string>();
    for (const trigger of triggers) {
      const expression = trigger.config.expression;
      if (typeof expression !== 'string') continue;
      seen.add(trigger.id);
      const fingerprint = JSON.stringify([trigger.functionId, trigger.config, trigger.metadata ?? null]);
      const held = this.jobs.get(trigger.id);
      if (held !== undefined && held.fingerprint === fingerprint) continue;
      if (held !== undefined) clearTimeout(held.timer);
      const schedule = parseCronExpression(expression);
      if ('error' in schedule) {
        this.jobs.delete(trigger.id);
        continue;
      }
      const job: Job = { trigger, fingerprint, schedule, timer: undefined };
      this.jobs.set(trigger.id, job);
      if (this.active) this.arm(job, new Date());
    }
    for (const [id, job] of this.jobs) {
      if (seen.has(id)) continue;
      clearTimeout(job.timer);
      this.jobs.delete(id);
    }
  }

  setActive(active: boolean): void {
    if (active === this.active) return;
    this.active = active;
    const now = new Date();
    for (const job of this.jobs.values()) {
      clearTimeout(job.timer);
      job.timer = undefined;
      if (active) this.arm(job, now);
    }
  }

  /** Sets the job's timer for its first tick after `after`. */
  private arm(job: Job, after: Date): void {
    const next = job.schedule.next(after);
    if (next === undefined) return;
    const delay = Math.max(0, next.getTime() - Date.now());
    job.timer = setTimeout(() => {
      if (this.jobs.get(job.trigger.id) !== job || !this.active) return;
      if (delay > MAX_TIMER_MS || Date.now() < next.getTime()) {
        this.arm(job, after);
        return;
      }
      this.arm(job, next);
      void this.fire(job.trigger, next);
    }, Math.min(delay, MAX_TIMER_MS));
    job.timer.unref();
  }

  private async fire(trigger: ModuleTrigger, scheduled: Date): Promise<void> {
    const { context } = this;
    const claim = `cron:tick:${trigger.id}:${scheduled.getTime()}`;
    let claimed: boolean;
    try {
      claimed = await context.leases().acquire(claim, context.peerId, Math.max(MIN_CLAIM_MS, context.leaseMs * 4));
    } catch (err) {
      context.logger.warn({ err, jobId: trigger.id }, 'cron tick could not be claimed; skipped');
      return;
    }
    if (!claimed) {
      context.logger.debug({ jobId: trigger.id }, 'cron tick already fired elsewhere');
      return;
    }
    const event = { trigger: 'cron', job_id: trigger.id, scheduled_time: rfc3339(scheduled), actual_time: rfc3339(new Date()) };
    const condition = trigger.config.condition_function_id;
    if (typeof condition === 'string' && !(await runCondition(context, condition, event))) return;
    context.logger.info({ jobId: trigger.id, functionId: trigger.functionId, scheduledTime: event.scheduled_time }, 'cron job fired');
    const outcome = await context.invoke(trigger.functionId, event, trigger.metadata === undefined ? {} : { metadata: trigger.metadata });
    if (!outcome.ok) context.triggerDropped(outcome.failure, { jobId: trigger.id, functionId: trigger.functionId }, 'cron job failed');
  }
}
