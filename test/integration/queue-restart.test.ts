import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { http, waitForStatus } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { WORKER_READY_MS, startEngine, startWorker, stopAll } from '../support/processes.js';

/**
 * The embedded store survives an engine restart (docs/queue.md#embedded): a message waiting out a
 * retry delay and a dead letter are still there after SIGTERM and a new start on the same file_path,
 * with their attempts counted.
 */
describe('embedded queue store across an engine restart', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-queue-restart-'));
  let engine: EngineHandle | undefined;
  let worker: WorkerHandle | undefined;
  afterAll(async () => {
    await stopAll(worker, engine);
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async (): Promise<void> => {
    engine = await startEngine({
      logLevel: 'warn',
      cluster: { processes: 1 },
      modules: [
        {
          name: 'iii-queue',
          config: {
            queue_configs: {
              'dlq-demo': { max_retries: 2, backoff_ms: 100 },
              ledger: { type: 'fifo', message_group_field: 'account_id', max_retries: 2, backoff_ms: 600_000 },
            },
            adapter: { name: 'builtin', config: { store_method: 'file_based', file_path: dir } },
          },
        },
      ],
    });
    worker = startWorker('queue-example-worker', engine.workerUrl);
    await waitForStatus(`${engine.httpUrl}/queue-test/ready`, (s) => s === 200, {}, WORKER_READY_MS);
  };
  const post = (path: string, body: unknown): ReturnType<typeof http> =>
    http(`${engine?.httpUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const call = async (functionId: string, payload: unknown): Promise<unknown> => (await post('/queue-test/call', { function_id: functionId, payload })).json<{ result: unknown }>().result;
  const runs = async (functionId: string): Promise<unknown[]> =>
    (await http(`${engine?.httpUrl}/queue-test/runs`)).json<{ functionId: string }[]>().filter((r) => r.functionId === functionId);

  it('keeps a delayed message (and its attempts) and a dead letter', async () => {
    await start();
    const dead = (await post('/dlq/enqueue', { message: 'persist me' })).json<{ receiptId: string }>().receiptId;
    await waitUntil(async () => ((await call('engine::queue::topic_stats', { topic: 'dlq-demo' })) as { dlq_depth: number }).dlq_depth === 1, 15_000, 'dead letter');
    // A withdrawal on an empty account fails once and then waits 10 minutes for its retry.
    const delayed = (await post('/transactions', { account_id: 'acc-r', type: 'withdraw', amount: 10 })).json<{ receiptId: string }>().receiptId;
    await waitUntil(async () => (await runs('ledger::apply')).length === 1, 15_000, 'first attempt');
    expect(await call('engine::queue::topic_stats', { topic: 'ledger' })).toMatchObject({ depth: 1, retried: 1 });

    await worker?.stop();
    await engine?.stop();
    await start();

    // The delayed message is ready at once after the restart; its second attempt is its last.
    await waitUntil(async () => ((await call('engine::queue::topic_stats', { topic: 'ledger' })) as { dlq_depth: number }).dlq_depth === 1, 20_000, 'ledger dead letter');
    expect(await runs('ledger::apply')).toHaveLength(1);
    const ledgerLetters = (await call('engine::queue::dlq_messages', { topic: 'ledger' })) as { id: string; retries: number }[];
    expect(ledgerLetters).toMatchObject([{ id: delayed, retries: 2 }]);
    const letters = (await call('engine::queue::dlq_messages', { topic: 'dlq-demo' })) as { id: string; retries: number; payload: unknown }[];
    expect(letters).toMatchObject([{ id: dead, retries: 2, payload: { message: 'persist me' } }]);
  });
});
