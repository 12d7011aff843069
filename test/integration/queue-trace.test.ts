// A queued call carries its enqueuer's W3C trace context to the consumer (docs/queue.md#delivery), as
// iii's queue does (engine/src/workers/queue/queue.rs: the job's span is parented on the stored
// traceparent and the function is called inside it): the consumer's invokefunction has the
// enqueuer's trace and its baggage, naming the consumer as `iii.function.id`. On each store: the
// embedded one, BullMQ (standard queues on Redis) and the FIFO scripts (FIFO queues on Redis).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from '../support/logs.js';
import type { InProcessEngine } from '../support/in-process.js';
import { startInProcessEngine } from '../support/in-process.js';
import { RawWorker } from '../support/raw-worker.js';
import type { RedisServer } from '../support/redis.js';
import { startRedisServer } from '../support/redis.js';

const ENQUEUER = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
type Frame = Record<string, any>;

for (const store of ['embedded', 'redis'] as const) {
  describe(`trace context through the queue (${store})`, () => {
    let redis: RedisServer | undefined;
    let engine: InProcessEngine;
    let worker: RawWorker;
    const seen: Frame[] = [];

    beforeAll(async () => {
      if (store === 'redis') redis = await startRedisServer();
      const adapter = store === 'redis' ? { name: 'redis', config: { redis_url: redis?.url } } : { name: 'builtin' };
      engine = await startInProcessEngine({
        logLevel: 'warn',
        modules: [{ name: 'iii-queue', config: { queue_configs: { std: {}, ordered: { type: 'fifo', message_group_field: 'g' } }, adapter } }],
      });
      worker = await RawWorker.connect(engine.workerUrl);
      worker.send({ type: 'registerfunction', id: 'tq::consumer' });
      worker.serve('tq::consumer', (_data: unknown, frame: Frame) => {
        seen.push(frame);
        return { ok: true };
      });
      await worker.sync();
    }, 30_000);
    afterAll(async () => {
      await worker?.close();
      await engine?.stop();
      await redis?.stop();
    });

    for (const queue of ['std', 'ordered']) {
      it(`a message of queue ${queue} reaches its consumer with the enqueuer's traceparent and baggage`, async () => {
        const id = randomUUID();
        const n = seen.length;
        worker.send({
          type: 'invokefunction',
          invocation_id: id,
          function_id: 'tq::consumer',
          data: { g: 'group-1', queue },
          action: { type: 'enqueue', queue },
          traceparent: ENQUEUER,
          baggage: 'tenant=acme,iii.function.id=tq::enqueuer',
        });
        expect(await worker.next((f) => f.type === 'invocationresult' && f.invocation_id === id)).toMatchObject({ result: { messageReceiptId: expect.any(String) } });
        await waitUntil(() => seen.length > n, 10_000, 'the consumer ran');
        const frame = seen[n] as Frame;
        expect(frame.data).toEqual({ g: 'group-1', queue });
        expect(frame.traceparent).toBe(ENQUEUER);
        // Baggage values are percent-encoded on the wire (W3C Baggage).
        const baggage = String(frame.baggage).split(',').map(decodeURIComponent).sort();
        expect(baggage).toEqual(['iii.function.id=tq::consumer', 'tenant=acme']);
      });
    }
  });
}
