import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { InvocationFailure } from '../../invocation/invoker.js';
import type { KvStore } from '../storage/kv-store.js';
import type { StreamBroadcast } from './stream-fanout.js';
import { StreamFanout } from './stream-fanout.js';
import type { StreamCalls, StreamFunctionId, StreamResult } from './stream-functions.js';
import { STREAM_FUNCTION_IDS, StreamFunctions } from './stream-functions.js';
import { StreamMetrics } from './stream-metrics.js';
import { StreamServer } from './stream-server.js';
import type { StreamTriggerRecord } from './stream-triggers.js';
import { StreamTriggers } from './stream-triggers.js';
import { SubscriptionRegistry } from './subscription-registry.js';

/** The `iii-stream` settings as the engine uses them (config keys: docs/stream.md#configuration). */
export interface StreamSettings {
  host: string;
  port: number;
  authFunction?: string;
  maxValueBytes: number;
  maxMessageBytes: number;
  maxBufferedBytes: number;
  maxSubscriptionsPerClient: number;
  maxConnections: number;
  maxPendingTriggerCalls: number;
}

export interface StreamModuleDeps {
  store: KvStore;
  broadcast: StreamBroadcast;
  calls: StreamCalls;
  /** The cluster-wide triggers of a stream type (`stream`, `stream:join`, `stream:leave`). */
  triggersOf(type: string): readonly StreamTriggerRecord[];
  metricsRegistry: Registry;
  logger: Logger;
  /** Where dropped trigger calls are counted and logged (the module host's, ModuleContext.triggerDropped). */
  triggerDropped?(cause: InvocationFailure | 'overflow', fields: Record<string, unknown>, message: string): void;
}

/** Client messages waiting per connection (each join may wait for its handlers). */
const MAX_PENDING_CLIENT_MESSAGES = 256;

/**
 * `iii-stream` in one engine process: the `stream::*` functions, the client listener, the fan-out
 * of every change in the cluster to this process's clients, and the stream trigger types.
 */
export class StreamModule {
  readonly functions: StreamFunctions;
  private readonly registry = new SubscriptionRegistry();
  private readonly server: StreamServer;
  private readonly fanout: StreamFanout;
  private readonly metrics: StreamMetrics;
  private closing: Promise<void> | undefined;

  constructor(
    readonly settings: StreamSettings,
    deps: StreamModuleDeps,
  ) {
    this.metrics = new StreamMetrics(deps.metricsRegistry, { clients: () => this.server.connections, subscriptions: () => this.registry.size });
    const triggers = new StreamTriggers({
      triggersOf: (type) => deps.triggersOf(type),
      calls: deps.calls,
      logger: deps.logger.child({ part: 'triggers' }),
      maxPendingFirings: settings.maxPendingTriggerCalls,
      dropped: (cause, fields, message) => {
        if (cause === 'overflow') this.metrics.triggerDropped();
        if (deps.triggerDropped !== undefined) deps.triggerDropped(cause, fields, message);
        else deps.logger.warn(fields, message);
      },
    });
    this.functions = new StreamFunctions({
      store: deps.store,
      calls: deps.calls,
      broadcast: (message) => deps.broadcast.publish(message),
      fireTriggers: (message) => triggers.fire(message),
      maxValueBytes: settings.maxValueBytes,
    });
    this.fanout = new StreamFanout(deps.store, deps.broadcast, this.registry, (frames) => this.metrics.framesDelivered(frames));
    this.server = new StreamServer(
      {
        host: settings.host,
        port: settings.port,
        ...(settings.authFunction === undefined ? {} : { authFunction: settings.authFunction }),
        maxMessageBytes: settings.maxMessageBytes,
        maxConnections: settings.maxConnections,
      },
      deps.calls,
      {
        registry: this.registry,
        functions: this.functions,
        triggers,
        limits: {
          maxBufferedBytes: settings.maxBufferedBytes,
          maxSubscriptions: settings.maxSubscriptionsPerClient,
          maxPendingMessages: MAX_PENDING_CLIENT_MESSAGES,
        },
        logger: deps.logger.child({ part: 'clients' }),
        onDropped: (reason) => this.metrics.dropped(reason),
        onMessage: (kind) => this.metrics.clientMessage(kind),
      },
      deps.logger,
    );
  }

  /** The engine functions this module serves, by id. */
  engineFunctions(): [StreamFunctionId, (input: unknown) => Promise<StreamResult>][] {
    return STREAM_FUNCTION_IDS.map((id) => [
      id,
      async (input: unknown) => {
        const result = await this.functions.call(id, input);
        this.metrics.call(id, result.ok);
        return result;
      },
    ]);
  }

  /** Starts hearing the cluster's changes, then opens the client listener; resolves with its port. */
  async start(): Promise<number> {
    this.fanout.start();
    return this.server.start();
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.fanout.close();
      await this.server.close();
    })();
    return this.closing;
  }
}
