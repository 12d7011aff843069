import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { Gauge } from 'prom-client';
import type { Registry } from 'prom-client';
import type { QueueConfig } from '../../config/queue-config.js';
import type { InvocationOutcome } from '../../invocation/invoker.js';
import type { CustomTriggerRecord } from '../../routing/registrations.js';
import type { EngineFunction } from '../../workers/engine-functions.js';
import type { QueueBackend } from './queue-backend.js';
import type { QueueFunctionsTarget } from './queue-functions.js';
import { QueueInputError, queueFunctions } from './queue-functions.js';
import type { AttemptOutcome, DeadLetterView, LaneSettings, LaneStats, QueueJob } from './queue-job.js';
import { SINGLE_GROUP } from './redis-fifo-store.js';
import { subscriberLane } from './subscriber-settings.js';

/** The trigger type durable-topic consumers register (iii's). */
export const DURABLE_SUBSCRIBER_TRIGGER = 'durable:subscriber';

/** A queued call's deadline: queued work may run long, but a hung call must not hold its slot forever. */
export const RUN_TIMEOUT_MS = 300_000;
/**
 * After the engine starts, how long a message whose function no worker serves yet waits for a worker
 * to (re)connect instead of failing an attempt: stored messages are ready at once after a restart,
 * before the workers are back, and must not be dead-lettered for that.
 */
export const START_GRACE_MS = 30_000;

export interface QueueModuleOptions {
  config: QueueConfig;
  /** Made at start (the Redis one loads BullMQ, which a process without queues should not pay for). */
  backend: () => Promise<QueueBackend>;
  /** How list_topics names the store (`builtin` or `redis`). */
  brokerType: string;
  /** Calls a function wherever a worker serves it in the cluster. */
  invoke: (functionId: string, data: unknown, options: QueueInvokeOptions) => Promise<InvocationOutcome>;
  /**
   * Whether a connected worker anywhere in the cluster serves the function (the function table). A
   * message waiting out the start grace looks again after each `tableChanged()`.
   */
  hasFunction: (functionId: string) => boolean;
  logger: Logger;
  /** Overrides START_GRACE_MS. */
  startGraceMs?: number;
  /** This process's metrics registry: the queue's gauges are added to it. */
  registry?: Registry;
}

/** How a message's function is called: its deadline, and the enqueuer's trace context (as iii hands it on). */
export interface QueueInvokeOptions {
  timeoutMs: number;
  /** The subscriber trigger's metadata (durable topics). */
  metadata?: Record<string, unknown>;
  traceparent?: string;
  baggage?: string;
}

interface TopicLane {
  settings: LaneSettings;
  conditionFunctionId?: string;
  /** The subscriber trigger's metadata: its handler gets it, as every trigger's (docs/compatibility.md). */
  metadata?: Record<string, unknown>;
}

/**
 * The built-in queue (docs/queue.md), one instance per engine process: named queues from
 * `iii-queue` `queue_configs` and durable topics from `durable:subscriber` triggers anywhere in the
 * cluster, each a *lane* in the backend's store. Every process consumes every lane; the store
 * decides who gets which message, so concurrency and FIFO order hold cluster-wide. Each message runs
 * its function through the cluster invoker (a local worker first, else a peer's).
 */
export class QueueModule implements QueueFunctionsTarget {
  private readonly named = new Map<string, LaneSettings>();
  /** topic → function id → its lane. */
  private topicLanes = new Map<string, Map<string, TopicLane>>();
  private readonly subscriberCounts = new Map<string, number>();
  readonly brokerType: string;
  private started = false;
  private held: QueueBackend | undefined;
  private closing: Promise<void> | undefined;
  private startedAt = 0;
  /** Messages waiting out the start grace for their function: woken by tableChanged() and close(). */
  private readonly tableWaiters = new Set<() => void>();
  /** Counts table rebuilds (tableChanged()). */
  private tableVersion = 0;

  constructor(private readonly options: QueueModuleOptions) {
    this.brokerType = options.brokerType;
    for (const q of options.config.queues.values()) {
      this.named.set(q.name, {
        lane: `queue:${q.name}`,
        concurrency: q.concurrency,
        fifo: q.fifo,
        maxAttempts: q.maxAttempts,
        backoffMs: q.backoffMs,
        pollIntervalMs: q.pollIntervalMs,
      });
    }
    if (options.registry !== undefined) this.registerMetrics(options.registry);
  }

  /** The engine functions to serve (engine::queue::*, iii::queue::*, iii::durable::publish). */
  functions(): [string, EngineFunction][] {
    return queueFunctions(this);
  }

  /** Starts this process's consumers of the named queues. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.startedAt = Date.now();
    this.held = await this.options.backend();
    for (const settings of this.named.values()) await this.held.consume(settings, (job) => this.run(job));
  }

  /**
   * The cluster's `durable:subscriber` triggers changed: consume the lanes of new (topic, function)
   * pairs, stop consuming those no trigger names any more (their messages stay stored).
   */
  async subscribersChanged(triggers: readonly CustomTriggerRecord[]): Promise<void> {
    if (this.closing !== undefined) return;
    const next = new Map<string, Map<string, TopicLane>>();
    const counts = new Map<string, number>();
    for (const trigger of [...triggers].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) {
      if (trigger.triggerType !== DURABLE_SUBSCRIBER_TRIGGER) continue;
      const topic = typeof trigger.config.topic === 'string' ? trigger.config.topic : '';
      if (topic === '') continue;
      counts.set(topic, (counts.get(topic) ?? 0) + 1);
      let byFunction = next.get(topic);
      if (byFunction === undefined) {
        byFunction = new Map();
        next.set(topic, byFunction);
      }
      if (byFunction.has(trigger.functionId)) continue;
      const condition = trigger.config.condition_function_id;
      byFunction.set(trigger.functionId, {
        settings: subscriberLane(topic, trigger.functionId, trigger.config.queue_config),
        ...(typeof condition === 'string' && condition !== '' ? { conditionFunctionId: condition } : {}),
        ...(trigger.metadata === undefined ? {} : { metadata: trigger.metadata }),
      });
    }
    const before = this.topicLanes;
    this.topicLanes = next;
    this.subscriberCounts.clear();
    for (const [topic, n] of counts) this.subscriberCounts.set(topic, n);
    const wanted = new Set<string>();
    for (const lanes of next.values()) {
      for (const lane of lanes.values()) {
        wanted.add(lane.settings.lane);
        await this.backend().consume(lane.settings, (job) => this.run(job, lane.conditionFunctionId, lane.metadata));
      }
    }
    for (const lanes of before.values()) {
      for (const lane of lanes.values()) if (!wanted.has(lane.settings.lane)) await this.backend().stopConsuming(lane.settings.lane);
    }
  }

  private async run(job: QueueJob, conditionFunctionId?: string, metadata?: Record<string, unknown>): Promise<AttemptOutcome> {
    // The enqueuer's trace context goes on to the consumer's invocation (iii: the queue job's span
    // is parented on the stored traceparent, and the call carries it).
    const options: QueueInvokeOptions = {
      timeoutMs: RUN_TIMEOUT_MS,
      ...(job.traceparent === undefined ? {} : { traceparent: job.traceparent }),
      ...(job.baggage === undefined ? {} : { baggage: job.baggage }),
    };
    if (conditionFunctionId !== undefined) {
      const condition = await this.invokeAfterStart(conditionFunctionId, job.data, options);
      if (!condition.ok) return { ok: false, error: `condition ${conditionFunctionId}: ${condition.failure.code}: ${condition.failure.message}` };
      if (condition.value === false) return { ok: true };
    }
    const outcome = await this.invokeAfterStart(job.functionId, job.data, metadata === undefined ? options : { ...options, metadata });
    if (outcome.ok) return { ok: true };
    return { ok: false, error: `${outcome.failure.code}: ${outcome.failure.message}` };
  }

  /**
   * Invokes; while the start grace lasts (START_GRACE_MS), a function no worker serves yet is waited
   * for: the call is made again once a table rebuild lists the function (tableChanged()), or fails the
   * attempt when the grace ends first. Nothing polls.
   */
  private async invokeAfterStart(functionId: string, data: unknown, options: QueueInvokeOptions): Promise<InvocationOutcome> {
    const graceEnd = this.startedAt + (this.options.startGraceMs ?? START_GRACE_MS);
    for (;;) {
      const tableBefore = this.tableVersion;
      const outcome = await this.options.invoke(functionId, data, options);
      if (outcome.ok || outcome.failure.source !== 'engine' || outcome.failure.code !== 'FUNCTION_UNAVAILABLE') return outcome;
      if (!(await this.servedAfter(functionId, tableBefore, graceEnd))) return outcome;
    }
  }

  /**
   * Resolves true once a table rebuild newer than `version` lists a worker serving the function (a
   * function listed but unable to take the call waits for the next rebuild, so nothing spins), false
   * at `until` (wall clock) or on close.
   */
  private async servedAfter(functionId: string, version: number, until: number): Promise<boolean> {
    for (;;) {
      if (this.closing !== undefined || Date.now() >= until) return false;
      // Checked and waited for in one step: a rebuild between the two cannot be missed.
      if (this.tableVersion !== version && this.options.hasFunction(functionId)) return true;
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          clearTimeout(timer);
          this.tableWaiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, until - Date.now());
        this.tableWaiters.add(wake);
      });
    }
  }

  /** The cluster's function table was rebuilt (a worker came or went): messages waiting for a function look again. */
  tableChanged(): void {
    this.tableVersion++;
    for (const wake of [...this.tableWaiters]) wake();
  }

  // QueueFunctionsTarget

  async enqueue(queue: string, functionId: string, data: unknown, receiptId: string, traceparent?: string, baggage?: string): Promise<void> {
    const settings = this.named.get(queue);
    if (settings === undefined) throw new QueueInputError(`Queue '${queue}' not found`);
    let group: string | undefined;
    if (settings.fifo) {
      const field = this.options.config.queues.get(queue)?.messageGroupField ?? '';
      const value = typeof data === 'object' && data !== null ? (data as Record<string, unknown>)[field] : undefined;
      if (value === undefined) throw new QueueInputError(`FIFO queue '${queue}' requires field '${field}' in data, but it was not found`);
      if (value === null) throw new QueueInputError(`FIFO queue '${queue}': field '${field}' must not be null`);
      group = typeof value === 'string' ? value : JSON.stringify(value);
    }
    await this.backend().enqueue(this.job(settings, receiptId, functionId, data, group, traceparent, baggage), settings);
  }

  async publish(topic: string, data: unknown): Promise<void> {
    const lanes = this.topicLanes.get(topic);
    if (lanes === undefined) {
      this.options.logger.debug({ topic }, 'published to a topic without subscribers; dropped');
      return;
    }
    await Promise.all(
      [...lanes].map(([functionId, lane]) =>
        this.backend().enqueue(this.job(lane.settings, randomUUID(), functionId, data, lane.settings.fifo ? SINGLE_GROUP : undefined), lane.settings),
      ),
    );
  }

  private job(settings: LaneSettings, id: string, functionId: string, data: unknown, group?: string, traceparent?: string, baggage?: string): QueueJob {
    return {
      id,
      lane: settings.lane,
      functionId,
      data,
      attemptsMade: 0,
      maxAttempts: settings.maxAttempts,
      backoffMs: settings.backoffMs,
      createdAt: Date.now(),
      ...(group === undefined ? {} : { group }),
      ...(traceparent === undefined ? {} : { traceparent }),
      ...(baggage === undefined ? {} : { baggage }),
    };
  }

  lanesOf(name: string): { queue: boolean; lanes: LaneSettings[] } {
    const named = this.named.get(name);
    if (named !== undefined) return { queue: true, lanes: [named] };
    return { queue: false, lanes: [...(this.topicLanes.get(name)?.values() ?? [])].map((lane) => lane.settings) };
  }

  namedQueues(): { name: string; concurrency: number }[] {
    return [...this.named].map(([name, settings]) => ({ name, concurrency: settings.concurrency }));
  }

  topics(): { topic: string; subscribers: number }[] {
    return [...this.subscriberCounts].map(([topic, subscribers]) => ({ topic, subscribers }));
  }

  deadLetters(lane: LaneSettings, offset: number, limit: number): Promise<DeadLetterView[]> {
    return this.backend().deadLetters(lane, offset, limit);
  }

  redrive(lane: LaneSettings): Promise<number> {
    return this.backend().redrive(lane);
  }

  redriveOne(lane: LaneSettings, id: string): Promise<boolean> {
    return this.backend().redriveOne(lane, id);
  }

  discard(lane: LaneSettings, id: string): Promise<boolean> {
    return this.backend().discard(lane, id);
  }

  stats(lane: LaneSettings): Promise<LaneStats> {
    return this.backend().stats(lane);
  }

  /** Every lane with its display name: `name` for a queue, `topic/function` for a subscriber. */
  private allLanes(): [string, LaneSettings][] {
    const out: [string, LaneSettings][] = [...this.named];
    for (const [topic, lanes] of this.topicLanes) for (const [functionId, lane] of lanes) out.push([`${topic}/${functionId}`, lane.settings]);
    return out;
  }

  private registerMetrics(registry: Registry): void {
    const registers = [registry];
    const labelNames = ['queue'] as const;
    // Read from the store, so the same cluster-wide value on every process: the primary keeps the max.
    const fromStore = (name: string, help: string, pick: (stats: LaneStats) => number): void => {
      const lanes = (): [string, LaneSettings][] => this.allLanes();
      const stats = (lane: LaneSettings): Promise<LaneStats> => this.backend().stats(lane);
      new Gauge({
        name,
        help,
        labelNames,
        aggregator: 'max',
        registers,
        async collect() {
          this.reset();
          for (const [label, lane] of lanes()) {
            try {
              this.set({ queue: label }, pick(await stats(lane)));
            } catch {
              // The store is unreachable: the series is left out of this scrape.
            }
          }
        },
      });
    };
    fromStore('switchyard_queue_depth', 'Messages in a queue: waiting, delayed for a retry, or running (cluster-wide)', (s) => s.depth);
    fromStore('switchyard_queue_in_flight', 'Messages of a queue running now (cluster-wide)', (s) => s.inFlight);
    fromStore('switchyard_queue_dead_letters', 'Messages in a queue\'s dead-letter store (cluster-wide)', (s) => s.deadLetters);
    fromStore('switchyard_queue_retried', 'Failed attempts scheduled again, since the store was created (cluster-wide)', (s) => s.retried);
    fromStore('switchyard_queue_dead_lettered', 'Messages moved to the dead-letter store, since the store was created (cluster-wide)', (s) => s.deadLettered);
    const lanes = (): [string, LaneSettings][] => this.allLanes();
    const running = (): Map<string, number> => this.held?.inFlightHere() ?? new Map<string, number>();
    new Gauge({
      name: 'switchyard_queue_running',
      help: 'Messages of a queue this process is running now (summed over processes)',
      labelNames,
      registers,
      collect() {
        this.reset();
        const here = running();
        for (const [label, lane] of lanes()) this.set({ queue: label }, here.get(lane.lane) ?? 0);
      },
    });
  }

  private backend(): QueueBackend {
    if (this.held === undefined) throw new Error('the queue is not started');
    return this.held;
  }

  /** Stops consuming (waiting briefly for what runs), then closes the store. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.held?.close() ?? Promise.resolve();
    this.tableChanged();
    return this.closing;
  }
}
