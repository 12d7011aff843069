/* Kept apart from stream-schema.ts so a cluster child gets them without loading zod. */

/** The defaults of iii-stream's keys (iii's for port and host; Switchyard's for the bounds). */
export const STREAM_DEFAULTS = {
  port: 3112,
  host: '0.0.0.0',
  max_value_bytes: 1_048_576,
  max_message_bytes: 65_536,
  max_buffered_bytes: 4_194_304,
  max_subscriptions_per_client: 1024,
  max_connections: 10_000,
  max_pending_trigger_calls: 1024,
} as const;
