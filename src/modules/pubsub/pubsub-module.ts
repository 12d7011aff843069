import type { EngineFunction } from '../../workers/engine-functions.js';
import type { EngineModule, ModuleContext, ModuleTrigger, ModuleTriggerType } from '../module.js';
import { failure, inputObject, moduleCall, requiredString, requiredValue, success } from '../module-input.js';

export const PUBLISH_FUNCTION = 'publish';

/**
 * Publishes whose subscriber calls are still running on this process; more are dropped (and logged)
 * rather than queued without bound: pub/sub is at most once, as in iii.
 */
const MAX_PUBLISHES_IN_FLIGHT = 1000;

/**
 * iii-pubsub (docs/pubsub.md): `publish` calls the function of every `subscribe` trigger of the topic
 * in the whole cluster once, with the published `data` as is (iii's fan-out: every subscription,
 * fire and forget). The process that handles `publish` makes the calls, through the invoker, so a
 * subscriber registered on any process or node is reached whatever the adapter.
 */
export class PubSubModule implements EngineModule {
  readonly name = 'iii-pubsub';
  readonly triggerTypes: readonly ModuleTriggerType[] = [{ id: 'subscribe', description: 'Subscribe to a topic (topic)' }];
  readonly functions: ReadonlyMap<string, EngineFunction>;
  /** topic → the functions of its subscribe triggers. */
  private topics = new Map<string, ModuleTrigger[]>();
  private inFlight = 0;
  private closed = false;

  constructor(private readonly context: ModuleContext) {
    this.functions = new Map<string, EngineFunction>([[PUBLISH_FUNCTION, (data) => moduleCall(PUBLISH_FUNCTION, () => this.publish(data))]]);
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }

  triggersChanged(triggers: readonly ModuleTrigger[]): void {
    const topics = new Map<string, ModuleTrigger[]>();
    for (const trigger of triggers) {
      const topic = trigger.config.topic;
      // As iii: a subscription without a topic is accepted and never called.
      if (typeof topic !== 'string' || topic === '') continue;
      const list = topics.get(topic) ?? [];
      list.push(trigger);
      topics.set(topic, list);
    }
    this.topics = topics;
  }

  private publish(data: unknown) {
    const input = inputObject(data);
    const topic = requiredString(input, 'topic');
    const payload = requiredValue(input, 'data');
    if (topic === '') return failure('topic_not_set', 'Topic is not set');
    const subscribers = this.topics.get(topic) ?? [];
    if (subscribers.length > 0 && !this.closed) {
      if (this.inFlight >= MAX_PUBLISHES_IN_FLIGHT) {
        this.context.triggerDropped('overflow', { topic, inFlight: this.inFlight, subscribers: subscribers.length }, 'publish dropped: too many publishes still calling their subscribers');
      } else {
        this.inFlight++;
        void Promise.all(subscribers.map((trigger) => this.deliver(trigger, topic, payload))).finally(() => this.inFlight--);
      }
    }
    return success(null);
  }

  private async deliver(trigger: ModuleTrigger, topic: string, payload: unknown): Promise<void> {
    const outcome = await this.context.invoke(trigger.functionId, payload, trigger.metadata === undefined ? {} : { metadata: trigger.metadata });
    if (!outcome.ok) this.context.triggerDropped(outcome.failure, { topic, triggerId: trigger.id, functionId: trigger.functionId }, 'subscriber call failed');
  }
}
