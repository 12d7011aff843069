import type { IiiModuleName } from '../config/types.js';
import type { ModuleFactory } from './module.js';
import { CronModule } from './cron/cron-module.js';
import { PubSubModule } from './pubsub/pubsub-module.js';
import { createQueueEngineModule } from './queue/queue-engine-module.js';
import { StateModule } from './state/state-module.js';
import { StreamEngineModule } from './stream/stream-engine-module.js';

/** How each iii module is built; a module without an entry is accepted in the config and not run yet. */
export const MODULE_FACTORIES: Partial<Record<IiiModuleName, ModuleFactory>> = {
  'iii-state': (context) => new StateModule(context),
  'iii-pubsub': (context) => new PubSubModule(context),
  'iii-cron': (context) => new CronModule(context),
  'iii-queue': (context) => createQueueEngineModule(context),
  'iii-stream': (context) => new StreamEngineModule(context),
};
