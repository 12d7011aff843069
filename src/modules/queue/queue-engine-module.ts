import type { EngineModule, ModuleContext, ModuleTrigger } from '../module.js';
import { toQueueConfig } from '../../config/queue-config.js';
import type { QueueModuleInput } from '../../config/queue-config.js';
import { createQueueBackend, queuePlacement } from './queue-backend-factory.js';
import type { CreatedBackend } from './queue-backend-factory.js';
import { DURABLE_SUBSCRIBER_TRIGGER, QueueModule } from './queue-module.js';

/**
 * `iii-queue` as an engine module (docs/queue.md): builds the backend the config places the messages
 * in, serves the queue's functions and the `durable:subscriber` trigger type, and hands the module
 * every such trigger of the cluster after each table rebuild.
 */
export function createQueueEngineModule(context: ModuleContext): EngineModule {
  // Validated once by the primary's config parser (src/config/queue-schema.ts); no zod in a child.
  const config = toQueueConfig(context.config as unknown as QueueModuleInput);
  const placement = queuePlacement(config, context.cluster.redisUrl);
  let created: CreatedBackend | undefined;
  const module = new QueueModule({
    config,
    backend: async () => {
      created = await createQueueBackend(config, {
        clusterName: context.cluster.name,
        ...(context.cluster.redisUrl === undefined ? {} : { clusterRedisUrl: context.cluster.redisUrl }),
        ...(context.primary === undefined ? {} : { primary: context.primary }),
        logger: context.logger,
      });
      return created.backend;
    },
    brokerType: placement.kind === 'redis' ? 'redis' : 'builtin',
    invoke: (functionId, data, options) => context.invoke(functionId, data, options),
    hasFunction: (functionId) => context.hasFunction(functionId),
    logger: context.logger,
    registry: context.registry,
  });
  let latest: readonly ModuleTrigger[] = [];
  let started = false;
  let applying: Promise<void> = Promise.resolve();
  const apply = (): void => {
    const triggers = latest;
    applying = applying.then(() => module.subscribersChanged(triggers)).catch((err: unknown) => context.logger.error({ err }, 'durable subscribers could not be applied'));
  };
  return {
    name: 'iii-queue',
    triggerTypes: [
      {
        id: DURABLE_SUBSCRIBER_TRIGGER,
        description: 'Runs the function for every message published to a durable topic (iii::durable::publish)',
        validate: (triggerConfig) => (typeof triggerConfig.topic === 'string' && triggerConfig.topic !== '' ? undefined : 'durable:subscriber needs a non-empty topic'),
      },
    ],
    functions: new Map(module.functions()),
    triggersChanged(triggers) {
      // Called after every table rebuild: also the moment a message waiting for its function looks again.
      module.tableChanged();
      latest = triggers;
      if (started) apply();
    },
    async start() {
      await module.start();
      started = true;
      apply();
    },
    async close() {
      await applying;
      await module.close();
      await created?.release();
    },
  };
}
