import type { EngineFunction } from '../../workers/engine-functions.js';
import type { EngineModule, ModuleContext, ModuleTrigger, ModuleTriggerType } from '../module.js';
import { parseCronExpression } from './cron-expression.js';
import { CronScheduler } from './cron-scheduler.js';

/** The lease whose holder fires every cron job of the cluster. */
const LEADER_LEASE = 'cron:leader';

/**
 * iii-cron (docs/cron.md): the `cron` trigger type, fired once per cluster per tick. Every process
 * tries to hold one lease (Redis, or the primary in embedded mode); only its holder runs timers, for
 * every cron trigger in the cluster, and claims each tick before firing it so that a lease handed
 * over mid-tick cannot fire a tick twice. When the holder dies its lease is released (embedded:
 * at once) or expires (Redis: lease_ms), and another process takes the jobs over.
 */
export class CronModule implements EngineModule {
  readonly name = 'iii-cron';
  readonly triggerTypes: readonly ModuleTriggerType[] = [
    {
      id: 'cron',
      description: 'Cron-based scheduled triggers (expression: 6 or 7 fields, seconds first, UTC; condition_function_id)',
      validate: (config) => {
        const expression = config.expression;
        if (typeof expression !== 'string' || expression === '') return 'Cron expression is required';
        const parsed = parseCronExpression(expression);
        return 'error' in parsed ? parsed.error : undefined;
      },
    },
  ];
  readonly functions: ReadonlyMap<string, EngineFunction> = new Map();
  private readonly scheduler: CronScheduler;
  private leaseTimer: NodeJS.Timeout | undefined;
  private leader = false;
  private closed = false;
  private attempting = false;

  constructor(private readonly context: ModuleContext) {
    this.scheduler = new CronScheduler(context);
  }

  /** How often the lease is tried (and renewed by its holder): a third of its time to live. */
  private get attemptMs(): number {
    return Math.max(100, Math.floor(this.context.leaseMs / 3));
  }

  start(): Promise<void> {
    this.leaseTimer = setInterval(() => void this.attempt(), this.attemptMs);
    this.leaseTimer.unref();
    void this.attempt();
    return Promise.resolve();
  }

  triggersChanged(triggers: readonly ModuleTrigger[]): void {
    this.scheduler.replace(triggers);
  }

  /** Takes or renews the lease; a holder that cannot renew stops firing at once. */
  private async attempt(): Promise<void> {
    if (this.closed || this.attempting) return;
    this.attempting = true;
    let held = false;
    try {
      held = await this.context.leases().acquire(LEADER_LEASE, this.context.peerId, this.context.leaseMs);
    } catch (err) {
      this.context.logger.warn({ err }, 'cron lease could not be taken or renewed');
    } finally {
      this.attempting = false;
    }
    if (this.closed || held === this.leader) return;
    this.leader = held;
    this.context.logger.info({ leader: held }, held ? 'this process fires the cluster\'s cron jobs' : 'cron lease lost; another process fires the cron jobs');
    this.scheduler.setActive(held);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.leaseTimer);
    this.scheduler.setActive(false);
    if (this.leader) {
      this.leader = false;
      // Handing over at once: the next process takes the jobs at its next attempt, not after lease_ms.
      await this.context.leases().release(LEADER_LEASE, this.context.peerId).catch(() => undefined);
    }
  }
}
