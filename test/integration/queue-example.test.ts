import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForStatus } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { WORKER_READY_MS, startEngine, startWorker, stopAll } from '../support/processes.js';
import type { RedisServer } from '../support/redis.js';
import { startRedisServer } from '../support/redis.js';

/**
 * iii's example app's queue routes (queue-basic, queue-dlq, queue-ecommerce, queue-financial,
 * queue-bulk-email; the fixture test/fixtures/workers/queue-example-worker.mjs is shaped like them),
 * against the built-in queue, embedded (two engine processes, the primary holds the store) and on
 * Redis. Plus durable topics and the dead-letter functions as iii's console calls them.
 */
const QUEUE_CONFIG = {
  queue_configs: {
    default: { max_retries: 3, concurrency: 5, type: 'standard' },
    'dlq-demo': { max_retries: 2, backoff_ms: 500 },
    payment: { type: 'fifo', message_group_field: 'orderId', concurrency: 2 },
    email: { concurrency: 5 },
    ledger: { type: 'fifo', message_group_field: 'account_id', concurrency: 2, backoff_ms: 100 },
    'bulk-email': { concurrency: 10 },
  },
};

interface Run {
  functionId: string;
  payload: Record<string, unknown>;
  at: number;
}

const json = { 'content-type': 'application/json' };

for (const mode of ['embedded', 'redis'] as const) {
  describe(`the example app's queue routes (${mode})`, () => {
    let redis: RedisServer | undefined;
    let engine: EngineHandle;
    let worker: WorkerHandle;

    const post = (path: string, body: unknown): ReturnType<typeof http> => http(`${engine.httpUrl}${path}`, { method: 'POST', headers: json, body: JSON.stringify(body) });
    const runs = async (functionId?: string): Promise<Run[]> => {
      const all = (await http(`${engine.httpUrl}/queue-test/runs`)).json<Run[]>();
      return functionId === undefined ? all : all.filter((r) => r.functionId === functionId);
    };
    const call = async (functionId: string, payload: unknown): Promise<unknown> => {
      const res = await post('/queue-test/call', { function_id: functionId, payload });
      expect(res.status, res.text).toBe(200);
      return res.json<{ result: unknown }>().result;
    };

    beforeAll(async () => {
      if (mode === 'redis') redis = await startRedisServer();
      engine = await startEngine({
        logLevel: 'warn',
        cluster:
          mode === 'redis'
            ? { processes: 1, redis_url: redis?.url, secret: 'queue-secret', name: `q${Math.random().toString(36).slice(2, 8)}`, advertise_host: '127.0.0.1' }
            : { processes: 2 },
        modules: [{ name: 'iii-queue', config: mode === 'embedded' ? { ...QUEUE_CONFIG, adapter: { name: 'builtin' } } : QUEUE_CONFIG }],
      });
      worker = startWorker('queue-example-worker', engine.workerUrl);
      await waitForStatus(`${engine.httpUrl}/queue-test/ready`, (s) => s === 200, {}, WORKER_READY_MS);
    }, 60_000);
    afterAll(async () => {
      await stopAll(worker, engine);
      await redis?.stop();
    });

    it('queue-basic: enqueue answers 202 with a receipt id and the job runs with its payload', async () => {
      const res = await post('/queue/enqueue', { task: 'hello', priority: 1 });
      expect(res.status).toBe(202);
      expect(res.json<{ receiptId: string }>().receiptId).toMatch(/^[0-9a-f-]{36}$/);
      const safe = await post('/queue/enqueue-safe', { task: 'safe-job' });
      expect(safe.status).toBe(202);
      const sent = await post('/queue/fire-and-forget', { event: 'page_viewed' });
      expect(sent.json()).toEqual({ status: 'sent' });
      await waitUntil(async () => (await runs('queue::process-job')).length >= 3, 15_000, 'three process-job runs');
      const payloads = (await runs('queue::process-job')).map((r) => r.payload);
      expect(payloads).toEqual(expect.arrayContaining([{ task: 'hello', priority: 1 }, { task: 'safe-job' }, expect.objectContaining({ event: 'page_viewed' })]));
    });

    it('queue-basic: enqueue to a queue that is not configured is refused, and the route answers 503', async () => {
      const res = await http(`${engine.httpUrl}/queue/enqueue-safe?queue=nope`, { method: 'POST', headers: json, body: '{"task":"x"}' });
      expect(res.status).toBe(503);
      expect(res.json<{ detail: string }>().detail).toContain("Queue 'nope' not found");
    });

    it('queue-ecommerce: an order runs its payment (fifo), its email and its analytics', async () => {
      const res = await post('/orders', { email: 'customer@example.com', total: 149.99 });
      expect(res.status).toBe(201);
      const { orderId } = res.json<{ orderId: string }>();
      await waitUntil(
        async () => {
          const all = await runs();
          return ['orders::process-payment', 'emails::confirmation', 'analytics::track'].every((id) => all.some((r) => r.functionId === id && r.payload.orderId === orderId));
        },
        15_000,
        'payment, email and analytics',
      );
      const [payment] = (await runs('orders::process-payment')).filter((r) => r.payload.orderId === orderId);
      expect(payment?.payload).toEqual({ orderId, amount: 149.99, currency: 'USD' });
    });

    it('queue-bulk-email: a campaign enqueues one job per recipient and each is sent', async () => {
      const recipients = Array.from({ length: 25 }, (_, i) => ({ email: `r${i}@example.com` }));
      const res = await post('/campaigns/launch', { subject: 'Welcome', body: 'Thanks', recipients });
      expect(res.json()).toEqual({ enqueued: 25 });
      await waitUntil(async () => (await runs('emails::send')).length >= 25, 20_000, '25 emails');
      const sent = new Set((await runs('emails::send')).map((r) => r.payload.to));
      expect(sent.size).toBe(25);
    });

    it('queue-financial: the ledger applies one account in order (deposits before the withdrawal they allow)', async () => {
      const account = `acc-${mode}`;
      for (let i = 0; i < 20; i++) {
        const res = await post('/transactions', { account_id: account, type: i % 2 === 0 ? 'deposit' : 'withdraw', amount: 10 });
        expect(res.status).toBe(202);
      }
      // Another account, interleaved: groups run in parallel.
      await post('/transactions', { account_id: `${account}-b`, type: 'deposit', amount: 5 });
      await waitUntil(async () => (await runs('ledger::apply')).filter((r) => r.payload.account_id === account).length >= 20, 20_000, '20 ledger runs');
      const order = (await runs('ledger::apply')).filter((r) => r.payload.account_id === account).map((r) => r.payload.type);
      // In order: any withdrawal run before its deposit would have thrown and been retried, running twice.
      expect(order).toEqual(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? 'deposit' : 'withdraw')));
      const balance = await http(`${engine.httpUrl}/accounts/${account}/balance`);
      expect(balance.json()).toEqual({ account_id: account, balance: 0 });
    });

    it('queue-dlq: a failing job runs max_retries times, lands in the dead-letter store, and is listed and redriven', async () => {
      const res = await post('/dlq/enqueue', { message: 'this will fail' });
      const { receiptId } = res.json<{ receiptId: string }>();
      await post('/dlq/enqueue', { succeed: true, message: 'fine' });
      await waitUntil(async () => ((await call('engine::queue::topic_stats', { topic: 'dlq-demo' })) as { dlq_depth: number }).dlq_depth === 1, 15_000, 'one dead letter');
      const attempts = (await runs('dlq-demo::process')).filter((r) => r.payload.message === 'this will fail');
      expect(attempts).toHaveLength(2);
      // backoff_ms 500: the second attempt waited at least that long.
      expect((attempts[1]?.at ?? 0) - (attempts[0]?.at ?? 0)).toBeGreaterThanOrEqual(450);
      expect((await runs('dlq-demo::process')).some((r) => r.payload.succeed === true)).toBe(true);

      const letters = (await call('engine::queue::dlq_messages', { topic: 'dlq-demo' })) as { id: string; payload: unknown; error: string; retries: number; failed_at: number }[];
      expect(letters).toHaveLength(1);
      expect(letters[0]).toMatchObject({ id: receiptId, payload: { message: 'this will fail' }, retries: 2 });
      expect(letters[0]?.error).toContain('Simulated failure for DLQ demo');
      expect(Math.abs((letters[0]?.failed_at ?? 0) - Date.now() / 1000)).toBeLessThan(60);

      const dlqTopics = (await call('engine::queue::dlq_topics', {})) as { topic: string; message_count: number }[];
      expect(dlqTopics).toContainEqual({ topic: 'dlq-demo', broker_type: 'function_queue', message_count: 1 });
      const topics = (await call('engine::queue::list_topics', {})) as { name: string; subscriber_count: number }[];
      expect(topics.find((t) => t.name === 'payment')?.subscriber_count).toBe(2);

      expect(await call('iii::queue::redrive_message', { queue: 'dlq-demo', message_id: 'not-there' })).toEqual({ queue: 'dlq-demo', message_id: 'not-there', redriven: 0 });
      expect(await call('iii::queue::redrive', { queue: 'dlq-demo' })).toEqual({ queue: 'dlq-demo', redriven: 1 });
      // Redriven: two more attempts, then back in the store; then discarded.
      await waitUntil(async () => (await runs('dlq-demo::process')).filter((r) => r.payload.message === 'this will fail').length === 4, 15_000, 'redriven attempts');
      await waitUntil(async () => ((await call('engine::queue::topic_stats', { queue: 'dlq-demo' })) as { dlq_depth: number }).dlq_depth === 1, 15_000, 'dead again');
      expect(await call('iii::queue::discard_message', { queue: 'dlq-demo', message_id: receiptId })).toEqual({ queue: 'dlq-demo', message_id: receiptId, redriven: 1 });
      expect(await call('engine::queue::dlq_messages', { topic: 'dlq-demo' })).toEqual([]);
    });

    it('the dead-letter functions answer iii\'s error codes for missing inputs', async () => {
      const res = await post('/queue-test/call', { function_id: 'iii::queue::redrive', payload: {} });
      expect(res.status).toBe(500);
      expect(res.json<{ error: string }>().error).toContain('Queue name is required');
      const missing = await post('/queue-test/call', { function_id: 'iii::durable::publish', payload: { data: 1 } });
      expect(missing.json<{ error: string }>().error).toContain('Topic is not set');
    });

    it('durable topics: every subscribed function gets each message; a condition can skip one', async () => {
      await waitUntil(async () => ((await call('engine::queue::list_topics', {})) as { name: string }[]).some((t) => t.name === 'orders.created'), 15_000, 'subscribers known');
      for (let i = 0; i < 10; i++) await call('iii::durable::publish', { topic: 'orders.created', data: { n: i, total: i * 20 } });
      await waitUntil(async () => (await runs('topic::audit')).length >= 10 && (await runs('topic::big-only')).length >= 5, 15_000, 'topic deliveries');
      expect(new Set((await runs('topic::audit')).map((r) => r.payload.n)).size).toBe(10);
      expect((await runs('topic::big-only')).map((r) => r.payload.n).sort()).toEqual([5, 6, 7, 8, 9]);
      const stats = (await call('engine::queue::topic_stats', { topic: 'orders.created' })) as { consumer_count: number; dlq_depth: number };
      expect(stats).toMatchObject({ consumer_count: 2, dlq_depth: 0 });
    });

    it('metrics: depth, in flight, dead letters, retried and dead-lettered per queue', async () => {
      const text = (await http(`${engine.adminUrl}/metrics`)).text;
      expect(text).toMatch(/switchyard_queue_dead_lettered\{queue="dlq-demo"\} [1-9]/);
      expect(text).toMatch(/switchyard_queue_retried\{queue="dlq-demo"\} [1-9]/);
      expect(text).toMatch(/switchyard_queue_depth\{queue="default"\} 0/);
      expect(text).toContain('switchyard_queue_in_flight{queue="payment"}');
      expect(text).toContain('switchyard_queue_dead_letters{queue="dlq-demo"}');
    });
  });
}
