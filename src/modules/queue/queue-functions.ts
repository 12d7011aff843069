import { randomUUID } from 'node:crypto';
import type { WireErrorCode } from '../../errors.js';
import type { EngineFunction, EngineFunctionResult } from '../../workers/engine-functions.js';
import type { DeadLetterView, LaneSettings, LaneStats } from './queue-job.js';

/** What the functions need of the queue module. */
export interface QueueFunctionsTarget {
  /** Throws QueueInputError for an unknown queue or a FIFO message without its group. */
  enqueue(queue: string, functionId: string, data: unknown, receiptId: string, traceparent?: string, baggage?: string): Promise<void>;
  publish(topic: string, data: unknown): Promise<void>;
  /** A named queue's lane, or a topic's lanes (one per subscribed function); empty for an unknown name. */
  lanesOf(name: string): { queue: boolean; lanes: LaneSettings[] };
  namedQueues(): { name: string; concurrency: number }[];
  topics(): { topic: string; subscribers: number }[];
  brokerType: string;
  deadLetters(lane: LaneSettings, offset: number, limit: number): Promise<DeadLetterView[]>;
  redrive(lane: LaneSettings): Promise<number>;
  redriveOne(lane: LaneSettings, id: string): Promise<boolean>;
  discard(lane: LaneSettings, id: string): Promise<boolean>;
  stats(lane: LaneSettings): Promise<LaneStats>;
}

/** A bad enqueue (unknown queue, FIFO message without its group): answered as INVALID_ARGUMENTS. */
export class QueueInputError extends Error {}

const fail = (code: WireErrorCode, message: string): EngineFunctionResult => ({ ok: false, error: { code, message } });
const ok = (value: unknown): EngineFunctionResult => ({ ok: true, value });

function record(data: unknown): Record<string, unknown> {
  return typeof data === 'object' && data !== null && !Array.isArray(data) ? (data as Record<string, unknown>) : {};
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function count(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : fallback;
}

function reason(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * The queue's engine functions, with iii's ids, inputs, outputs and error codes (iii 0.22.1,
 * engine/src/workers/queue/queue.rs and mod.rs; docs/queue.md#functions).
 */
export function queueFunctions(target: QueueFunctionsTarget): [string, EngineFunction][] {
  const enqueue: EngineFunction = async (data) => {
    const input = record(data);
    const queue = text(input.queue);
    const functionId = text(input.function_id);
    if (queue === '' || functionId === '') return fail('INVALID_ARGUMENTS', 'queue and function_id are required');
    const receipt = text(input.messageReceiptId) === '' ? randomUUID() : text(input.messageReceiptId);
    try {
      await target.enqueue(queue, functionId, input.data ?? null, receipt, text(input.traceparent) || undefined, text(input.baggage) || undefined);
    } catch (err) {
      if (err instanceof QueueInputError) return fail('INVALID_ARGUMENTS', err.message);
      throw err;
    }
    return ok({ messageReceiptId: receipt });
  };

  const publish: EngineFunction = async (data) => {
    const input = record(data);
    const topic = text(input.topic);
    if (topic === '') return fail('topic_not_set', 'Topic is not set');
    await target.publish(topic, input.data ?? null);
    return ok(null);
  };

  const queueName = (input: Record<string, unknown>): string => text(input.queue) || text(input.topic);
  const topicName = (input: Record<string, unknown>): string => text(input.topic) || text(input.queue);

  const redrive: EngineFunction = async (data) => {
    const queue = queueName(record(data));
    if (queue === '') return fail('queue_not_set', 'Queue name is required');
    try {
      let redriven = 0;
      for (const lane of target.lanesOf(queue).lanes) redriven += await target.redrive(lane);
      return ok({ queue, redriven });
    } catch (err) {
      return fail('redrive_failed', `Failed to redrive DLQ for queue '${queue}': ${reason(err)}`);
    }
  };

  const oneMessage =
    (action: (lane: LaneSettings, id: string) => Promise<boolean>, code: 'redrive_message_failed' | 'discard_message_failed'): EngineFunction =>
    async (data) => {
      const input = record(data);
      const queue = queueName(input);
      const messageId = text(input.message_id);
      if (queue === '') return fail('queue_not_set', 'Queue name is required');
      if (messageId === '') return fail('message_id_not_set', 'Message ID is required');
      try {
        let found = false;
        for (const lane of target.lanesOf(queue).lanes) {
          if (await action(lane, messageId)) {
            found = true;
            break;
          }
        }
        return ok({ queue, message_id: messageId, redriven: found ? 1 : 0 });
      } catch (err) {
        return fail(code, `Failed on DLQ message '${messageId}' of queue '${queue}': ${reason(err)}`);
      }
    };

  const listTopics: EngineFunction = () => {
    const out = [
      ...target.namedQueues().map((q) => ({ name: q.name, broker_type: target.brokerType, subscriber_count: q.concurrency })),
      ...target.topics().map((t) => ({ name: t.topic, broker_type: target.brokerType, subscriber_count: t.subscribers })),
    ];
    return ok(out);
  };

  const topicStats: EngineFunction = async (data) => {
    const topic = topicName(record(data));
    if (topic === '') return fail('topic_required', 'topic is required');
    try {
      const { queue, lanes } = target.lanesOf(topic);
      const sum = { depth: 0, inFlight: 0, deadLetters: 0, retried: 0, deadLettered: 0 };
      for (const lane of lanes) {
        const stats = await target.stats(lane);
        sum.depth += stats.depth;
        sum.inFlight += stats.inFlight;
        sum.deadLetters += stats.deadLetters;
        sum.retried += stats.retried;
        sum.deadLettered += stats.deadLettered;
      }
      const consumers = queue ? (lanes[0]?.concurrency ?? 0) : lanes.length;
      return ok({
        depth: sum.depth,
        consumer_count: consumers,
        dlq_depth: sum.deadLetters,
        config: null,
        // Switchyard's additions (docs/queue.md#metrics).
        in_flight: sum.inFlight,
        retried: sum.retried,
        dead_lettered: sum.deadLettered,
      });
    } catch (err) {
      return fail('topic_stats_failed', `Failed to get topic stats: ${reason(err)}`);
    }
  };

  const dlqTopics: EngineFunction = async () => {
    try {
      const out: { topic: string; broker_type: string; message_count: number }[] = [];
      for (const t of target.topics()) {
        let n = 0;
        for (const lane of target.lanesOf(t.topic).lanes) n += (await target.stats(lane)).deadLetters;
        out.push({ topic: t.topic, broker_type: target.brokerType, message_count: n });
      }
      for (const q of target.namedQueues()) {
        let n = 0;
        for (const lane of target.lanesOf(q.name).lanes) n += (await target.stats(lane)).deadLetters;
        out.push({ topic: q.name, broker_type: 'function_queue', message_count: n });
      }
      return ok(out);
    } catch (err) {
      return fail('dlq_topics_failed', `Failed to list DLQ topics: ${reason(err)}`);
    }
  };

  const dlqMessages: EngineFunction = async (data) => {
    const input = record(data);
    const topic = topicName(input);
    if (topic === '') return fail('topic_required', 'topic is required');
    const offset = count(input.offset, 0);
    const limit = count(input.limit, 50);
    try {
      const { lanes } = target.lanesOf(topic);
      if (lanes.length === 1 && lanes[0] !== undefined) return ok(await target.deadLetters(lanes[0], offset, limit));
      // A topic: every subscriber's dead letters, newest first, then the page.
      const all: DeadLetterView[] = [];
      for (const lane of lanes) all.push(...(await target.deadLetters(lane, 0, offset + limit)));
      all.sort((a, b) => b.failed_at - a.failed_at);
      return ok(all.slice(offset, offset + limit));
    } catch (err) {
      return fail('dlq_messages_failed', `Failed to browse DLQ messages: ${reason(err)}`);
    }
  };

  return [
    ['engine::queue::enqueue', enqueue],
    ['iii::durable::publish', publish],
    ['iii::queue::redrive', redrive],
    ['iii::queue::redrive_message', oneMessage((lane, id) => target.redriveOne(lane, id), 'redrive_message_failed')],
    ['iii::queue::discard_message', oneMessage((lane, id) => target.discard(lane, id), 'discard_message_failed')],
    ['engine::queue::list_topics', listTopics],
    ['engine::queue::topic_stats', topicStats],
    ['engine::queue::dlq_topics', dlqTopics],
    ['engine::queue::dlq_messages', dlqMessages],
  ];
}
