import type { LaneSettings } from './queue-job.js';

/** A durable subscriber's defaults when its trigger has no `queue_config` (iii's builtin queue defaults). */
export const SUBSCRIBER_DEFAULTS = { maxAttempts: 3, concurrency: 10, backoffMs: 1000, pollIntervalMs: 100 } as const;

/** The lane of one (topic, function) pair: `topic:<topic>:<function>`, both percent-encoded. */
export function topicLaneName(topic: string, functionId: string): string {
  return `topic:${encodeURIComponent(topic)}:${encodeURIComponent(functionId)}`;
}

function positiveInt(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}

/**
 * A `durable:subscriber` trigger's lane settings from its optional `queue_config` (iii's
 * SubscriberQueueConfig keys: `type` standard|fifo, `maxRetries` — retries after the first attempt,
 * so attempts = maxRetries + 1 —, `concurrency`, `backoffDelayMs`). Other keys are ignored.
 */
export function subscriberLane(topic: string, functionId: string, queueConfig: unknown): LaneSettings {
  const config = typeof queueConfig === 'object' && queueConfig !== null ? (queueConfig as Record<string, unknown>) : {};
  const retries = positiveInt(config.maxRetries);
  const concurrency = positiveInt(config.concurrency);
  const backoff = positiveInt(config.backoffDelayMs);
  const fifo = config.type === 'fifo';
  return {
    lane: topicLaneName(topic, functionId),
    // A fifo subscriber has no group field: its messages run one at a time, in order.
    concurrency: fifo ? 1 : concurrency !== undefined && concurrency > 0 ? concurrency : SUBSCRIBER_DEFAULTS.concurrency,
    fifo,
    maxAttempts: retries === undefined ? SUBSCRIBER_DEFAULTS.maxAttempts : retries + 1,
    backoffMs: backoff ?? SUBSCRIBER_DEFAULTS.backoffMs,
    pollIntervalMs: SUBSCRIBER_DEFAULTS.pollIntervalMs,
  };
}
