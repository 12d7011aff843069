import type { WireErrorCode } from '../../errors.js';
import type { EngineFunction } from '../../workers/engine-functions.js';
import { STREAM_DEFAULTS } from '../../config/modules/stream-defaults.js';
import type { StreamModuleInput } from '../../config/modules/stream-schema.js';
import type { EngineModule, ModuleContext, ModuleTrigger, ModuleTriggerType } from '../module.js';
import { storeBroadcast } from './store-broadcast.js';
import type { StreamResult } from './stream-functions.js';
import { StreamModule } from './stream-module.js';
import { JOIN_TRIGGER_TYPE, LEAVE_TRIGGER_TYPE, STREAM_TRIGGER_TYPE, checkStreamTriggerConfig } from './stream-triggers.js';
import type { StreamTriggerRecord } from './stream-triggers.js';

/** A stream function's answer as an engine function's: a custom stream's worker error keeps its own code. */
function engineResult(result: StreamResult): ReturnType<EngineFunction> {
  if (result.ok) return result;
  return { ok: false, error: { ...result.error, code: result.error.code as WireErrorCode } };
}

/**
 * iii-stream as the module host runs it (docs/stream.md): the stream functions as engine functions,
 * the `stream`, `stream:join`, `stream:leave` trigger types, the client listener on start.
 */
export class StreamEngineModule implements EngineModule {
  readonly name = 'iii-stream';
  readonly triggerTypes: readonly ModuleTriggerType[] = [
    { id: STREAM_TRIGGER_TYPE, description: 'A stream item changed (stream::set, update, delete, send)', validate: (config) => checkStreamTriggerConfig(STREAM_TRIGGER_TYPE, config) },
    { id: JOIN_TRIGGER_TYPE, description: 'A stream client joined a group or item' },
    { id: LEAVE_TRIGGER_TYPE, description: 'A stream client left a group or item' },
  ];
  readonly functions: ReadonlyMap<string, EngineFunction>;
  private readonly stream: StreamModule;
  private byType = new Map<string, StreamTriggerRecord[]>();

  constructor(context: ModuleContext) {
    // Validated once by the primary's config parser (stream-schema.ts); no zod in a child.
    const config = { ...STREAM_DEFAULTS, ...(context.config as StreamModuleInput) };
    const store = context.kvStore();
    this.stream = new StreamModule(
      {
        host: config.host,
        port: config.port,
        ...(config.auth_function === undefined ? {} : { authFunction: config.auth_function }),
        maxValueBytes: config.max_value_bytes,
        maxMessageBytes: config.max_message_bytes,
        maxBufferedBytes: config.max_buffered_bytes,
        maxSubscriptionsPerClient: config.max_subscriptions_per_client,
        maxConnections: config.max_connections,
        maxPendingTriggerCalls: config.max_pending_trigger_calls,
      },
      {
        store,
        broadcast: storeBroadcast(store),
        calls: { has: (id) => context.hasFunction(id), invoke: (id, data, metadata) => context.invoke(id, data, metadata === undefined ? {} : { metadata }) },
        triggersOf: (type) => this.byType.get(type) ?? [],
        metricsRegistry: context.registry,
        logger: context.logger,
        triggerDropped: (cause, fields, message) => context.triggerDropped(cause, fields, message),
      },
    );
    this.functions = new Map(this.stream.engineFunctions().map(([id, fn]) => [id, async (data: unknown) => engineResult(await fn(data))]));
  }

  triggersChanged(triggers: readonly ModuleTrigger[]): void {
    const byType = new Map<string, StreamTriggerRecord[]>();
    for (const trigger of triggers) {
      const list = byType.get(trigger.triggerType) ?? [];
      list.push({ id: trigger.id, functionId: trigger.functionId, config: trigger.config, ...(trigger.metadata === undefined ? {} : { metadata: trigger.metadata }) });
      byType.set(trigger.triggerType, list);
    }
    this.byType = byType;
  }

  async start(): Promise<void> {
    await this.stream.start();
  }

  close(): Promise<void> {
    return this.stream.close();
  }
}
