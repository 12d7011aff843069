import { z } from 'zod';
import { kvOrRedisAdapterSchema } from './adapter-schemas.js';

/**
 * iii-stream's config (iii's StreamModuleConfig keys, engine/src/workers/stream/config.rs; docs/stream.md),
 * plus Switchyard's bounds on what clients may cost (`max_*`, docs/stream.md#limits). Kept as the file
 * gives it; the stream module applies STREAM_DEFAULTS.
 */
export const streamModuleSchema = z
  .strictObject({
    port: z.int().min(0).max(65535).optional().describe('Port of the stream client WebSocket listener (default 3112); every engine process listens on it'),
    host: z.string().min(1).optional().describe('Address the stream client listener binds (default 0.0.0.0)'),
    auth_function: z
      .string()
      .min(1)
      .optional()
      .describe('Function called as each client connects, with `{headers, path, query_params, addr}`; the `context` it answers goes to the `stream:join` / `stream:leave` handlers'),
    adapter: kvOrRedisAdapterSchema("Where items are kept: `kv` (default) or `redis`. iii's `bridge` adapter is not supported"),
    max_value_bytes: z
      .int()
      .min(1)
      .optional()
      .describe("Largest `data` of `stream::set` / `stream::send` (and `ops` of `stream::update`, and the item an update writes), as JSON bytes (default 1048576); larger is refused with `VALUE_TOO_LARGE`. Switchyard's"),
    max_message_bytes: z.int().min(256).optional().describe("Largest frame a client may send (default 65536); a larger one closes its connection with 1009. Switchyard's"),
    max_buffered_bytes: z
      .int()
      .min(1024)
      .optional()
      .describe("Bytes queued for a client that does not read fast enough before it is dropped, closed with 1013 and counted (default 4194304). Switchyard's"),
    max_subscriptions_per_client: z.int().min(1).optional().describe("Subscriptions one client connection may hold (default 1024); more close it with 1008. Switchyard's"),
    max_connections: z.int().min(1).optional().describe("Client connections one engine process accepts (default 10000); more are answered 503. Switchyard's"),
    max_pending_trigger_calls: z
      .int()
      .min(1)
      .optional()
      .describe("Changes whose `stream` trigger calls may be running at once on a process (default 1024); the triggers of further changes are dropped and counted. Switchyard's"),
  })
  .describe('Streams: `stream::set/get/delete/update/list/list_groups/list_all/send`, the client WebSocket listener, and the `stream`, `stream:join`, `stream:leave` trigger types');

export type StreamModuleInput = z.output<typeof streamModuleSchema>;
