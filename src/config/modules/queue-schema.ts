import { z } from 'zod';

/** iii-queue's config: owned by the queue module's author; accepted as given until then. */
export const queueModuleSchema = z.record(z.string(), z.unknown()).describe('Durable queues');

export type QueueModuleInput = z.output<typeof queueModuleSchema>;
