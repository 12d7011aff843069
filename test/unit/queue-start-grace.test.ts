import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { toQueueConfig } from '../../src/config/queue-config.js';
import { queueModuleSchema } from '../../src/config/queue-schema.js';
import type { InvocationOutcome } from '../../src/invocation/invoker.js';
import { EmbeddedQueueStore } from '../../src/modules/queue/embedded-store.js';
import { StoreBackend } from '../../src/modules/queue/queue-backend.js';
import type { LaneStats } from '../../src/modules/queue/queue-job.js';
import { QueueModule } from '../../src/modules/queue/queue-module.js';
import { waitUntil } from '../support/logs.js';

const logger = pino({ level: 'silent' });
const unavailable: InvocationOutcome = { ok: false, failure: { source: 'engine', code: 'FUNCTION_UNAVAILABLE', message: 'no connected worker serves f' } };

/**
 * Stored messages are ready at once when the engine starts (an embedded store replays its journal),
 * before the workers have reconnected: while the start grace lasts, a message whose function no worker
 * serves yet waits for one instead of failing an attempt (docs/queue.md#delivery). It waits on the
 * function table (tableChanged() after each rebuild), not by calling again on a timer.
 */
describe('queue start grace', () => {
  let module: QueueModule | undefined;
  afterEach(async () => {
    await module?.close();
    module = undefined;
  });

  const setUp = (startGraceMs: number, served: () => boolean, listed: () => boolean = served): { calls: number[] } => {
    const calls: number[] = [];
    const config = toQueueConfig(queueModuleSchema.parse({ queue_configs: { q: { max_retries: 3, backoff_ms: 10_000, poll_interval_ms: 10 } } }));
    module = new QueueModule({
      config,
      backend: () => Promise.resolve(new StoreBackend(EmbeddedQueueStore.open(undefined, logger), logger)),
      brokerType: 'builtin',
      invoke: () => {
        calls.push(Date.now());
        return Promise.resolve(served() ? { ok: true, value: null } : unavailable);
      },
      hasFunction: listed,
      logger,
      startGraceMs,
    });
    return { calls };
  };
  const stats = async (): Promise<LaneStats> => {
    const lane = module?.lanesOf('q').lanes[0];
    if (module === undefined || lane === undefined) throw new Error('no lane q');
    return module.stats(lane);
  };

  it('waits for a worker to serve the function instead of failing the attempt, without calling again meanwhile', async () => {
    let served = false;
    const { calls } = setUp(60_000, () => served);
    await module?.start();
    await module?.enqueue('q', 'f', { n: 1 }, 'm-1');
    await waitUntil(() => calls.length === 1, 10_000, 'the first call');
    // A rebuild that does not list the function changes nothing; nor does time passing.
    module?.tableChanged();
    await new Promise((r) => setTimeout(r, 400));
    expect(calls).toHaveLength(1);
    expect((await stats()).retried).toBe(0);
    served = true;
    module?.tableChanged();
    await waitUntil(async () => (await stats()).depth === 0, 10_000, 'message acknowledged');
    expect(calls).toHaveLength(2);
    expect(await stats()).toMatchObject({ retried: 0, deadLetters: 0 });
  });

  it('a function listed but refusing the call is called again on the next rebuild, not at once', async () => {
    let served = false;
    const { calls } = setUp(60_000, () => served, () => true);
    await module?.start();
    await module?.enqueue('q', 'f', { n: 1 }, 'm-1');
    await waitUntil(() => calls.length === 1, 10_000, 'the first call');
    await new Promise((r) => setTimeout(r, 300));
    expect(calls).toHaveLength(1);
    module?.tableChanged();
    await waitUntil(() => calls.length === 2, 10_000, 'called again after the rebuild');
    served = true;
    module?.tableChanged();
    await waitUntil(async () => (await stats()).depth === 0, 10_000, 'message acknowledged');
    expect(calls).toHaveLength(3);
    expect((await stats()).retried).toBe(0);
  });

  it('fails the attempt when the grace ends before a worker serves the function', async () => {
    const { calls } = setUp(300, () => false);
    await module?.start();
    await module?.enqueue('q', 'f', { n: 1 }, 'm-1');
    await waitUntil(async () => (await stats()).retried === 1, 10_000, 'attempt failed');
    expect(calls).toHaveLength(1);
  });

  it('fails the attempt once the grace is over', async () => {
    const { calls } = setUp(0, () => false);
    await module?.start();
    await module?.enqueue('q', 'f', { n: 1 }, 'm-1');
    await waitUntil(async () => (await stats()).retried === 1, 10_000, 'attempt failed');
    expect(calls).toHaveLength(1);
  });
});
