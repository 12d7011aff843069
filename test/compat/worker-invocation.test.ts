// How worker calls travel, as iii 0.22.1 makes them (engine/src/engine/mod.rs, the InvokeFunction arm;
// worker_connections/traits.rs), with the real iii-sdk 0.22.1 in this process against a two-process
// engine, so a caller and its target are often on different processes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForEveryProcess } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';

// The SDK reads its OpenTelemetry switch at import: off, so no exporter dials the engine's /otel.
process.env.OTEL_ENABLED = 'false';
const { registerWorker, TriggerAction } = await import('iii-sdk');
type Client = ReturnType<typeof registerWorker>;

const RECONNECT = { maxRetries: 3, initialDelayMs: 100, maxDelayMs: 1000 };
const workerIdOf = (client: Client): string => (client as unknown as { workerId: string }).workerId;

describe('worker calls on a two-process engine', () => {
  let engine: EngineHandle;
  const clients: Client[] = [];
  const connect = (name: string): Client => {
    const client = registerWorker(engine.workerUrl, { reconnectionConfig: RECONNECT, workerName: name });
    clients.push(client);
    return client;
  };
  /** Calls until the function is served somewhere (registrations travel to the other process). */
  const callWhenServed = async <T>(client: Client, request: Parameters<Client['trigger']>[0]): Promise<T> => {
    let last: unknown;
    let result: T | undefined;
    await waitUntil(
      async () => {
        try {
          result = (await client.trigger(request));
          return true;
        } catch (err) {
          last = err;
          const { code, message } = err as { code?: string; message?: string };
          if (code === 'function_not_found') return false;
          // An Enqueue whose provider's registration has not reached the caller's process yet (the
          // provider may be on the other one): iii's answer with no provider, until it arrives.
          if (code === 'enqueue_error' && String(message).includes('No queue provider')) return false;
          throw err;
        }
      },
      10_000,
      `${request.function_id} to be served (last: ${String(last)})`,
    );
    return result as T;
  };

  beforeAll(async () => {
    engine = await startEngine({ cluster: { processes: 2 }, logLevel: 'info' });
  });
  afterAll(async () => {
    for (const client of clients) await client.shutdown().catch(() => undefined);
    await engine?.stop();
  });

  describe('metadata travels as in iii (views.rs call_with_metadata; traits.rs invokefunction.metadata)', () => {
    it('an http trigger\'s metadata reaches its handler on every process; middleware and condition get none', async () => {
      const app = connect('metadata-http');
      const seen: unknown[] = [];
      app.registerFunction('meta::todo', (req: { body: unknown }, metadata?: unknown) => {
        seen.push(metadata);
        return Promise.resolve({ status_code: 200, body: { metadata: metadata ?? null } });
      });
      app.registerFunction('meta::allowed', (_req: unknown, metadata?: unknown) => {
        seen.push({ condition: metadata ?? null });
        return Promise.resolve(true);
      });
      app.registerTrigger({
        type: 'http',
        function_id: 'meta::todo',
        config: { api_path: 'meta/todo', http_method: 'GET', condition_function_id: 'meta::allowed' },
        metadata: { tags: ['todo'], owner: { team: 'blue' } },
      });
      const url = `${engine.httpUrl}/meta/todo`;
      await waitForEveryProcess(url, 2);
      for (let i = 0; i < 4; i++) {
        const res = await http(url, { headers: { connection: 'close' } });
        expect(res.status).toBe(200);
        expect(res.json()).toEqual({ metadata: { tags: ['todo'], owner: { team: 'blue' } } });
      }
      expect(seen).toContainEqual({ condition: null });
    });

    it('trigger() metadata reaches the target, with and without a reply, across processes; an object payload names its caller', async () => {
      const target = connect('metadata-target');
      const calls: { data: Record<string, unknown>; metadata: unknown }[] = [];
      target.registerFunction('meta::target', (data: Record<string, unknown>, metadata?: unknown) => {
        calls.push({ data, metadata });
        return Promise.resolve({ got: metadata ?? null });
      });
      // Connections are dealt to the two processes in turn: one caller is on the target's process, one is not.
      const callers = [connect('metadata-caller-1'), connect('metadata-caller-2')];
      for (const caller of callers) {
        await expect(callWhenServed(caller, { function_id: 'meta::target', payload: { n: 1 }, metadata: { tenant: 'acme' } })).resolves.toEqual({ got: { tenant: 'acme' } });
        const call = calls.at(-1);
        expect(call?.metadata).toEqual({ tenant: 'acme' });
        expect(call?.data).toEqual({ n: 1, _caller_worker_id: workerIdOf(caller) });

        const before = calls.length;
        await caller.trigger({ function_id: 'meta::target', payload: { n: 2 }, metadata: [1, 'two'], action: TriggerAction.Void() });
        await waitUntil(() => calls.length > before, 10_000, 'the void call to arrive');
        expect(calls.at(-1)).toEqual({ data: { n: 2, _caller_worker_id: workerIdOf(caller) }, metadata: [1, 'two'] });

        // A payload that is not an object goes as it is.
        await caller.trigger({ function_id: 'meta::target', payload: [1, 2] });
        expect(calls.at(-1)).toEqual({ data: [1, 2], metadata: undefined });
      }
    });
  });

  describe('TriggerAction.Enqueue is never run inline (iii: the TriggerAction::Enqueue arm)', () => {
    it('without a provider of engine::queue::enqueue the caller gets enqueue_error and the target never runs', async () => {
      const target = connect('enqueue-target');
      let ran = 0;
      target.registerFunction('enqueue::target', () => {
        ran++;
        return Promise.resolve({ ran: true });
      });
      const caller = connect('enqueue-caller');
      // The target is served (a plain call reaches it), so only the action decides what happens.
      await expect(callWhenServed(caller, { function_id: 'enqueue::target', payload: {} })).resolves.toEqual({ ran: true });
      ran = 0;
      const enqueued = caller.trigger({ function_id: 'enqueue::target', payload: { n: 1 }, action: TriggerAction.Enqueue({ queue: 'default' }) });
      await expect(enqueued).rejects.toMatchObject({ code: 'enqueue_error' });
      await expect(enqueued).rejects.toThrow(/engine::queue::enqueue/);
      expect(ran).toBe(0);
    });

    it('a worker that provides engine::queue::enqueue gets iii\'s input and the caller gets the receipt id', async () => {
      const provider = connect('queue-provider');
      const received: Record<string, unknown>[] = [];
      provider.registerFunction('engine::queue::enqueue', (input: Record<string, unknown>) => {
        received.push(input);
        if (input.queue === 'refusing') return Promise.reject(new Error('the queue is full'));
        return Promise.resolve({ accepted: true });
      });
      const target = connect('enqueued-target');
      let ran = 0;
      target.registerFunction('enqueue::job', () => {
        ran++;
        return Promise.resolve({});
      });
      const caller = connect('enqueue-producer');
      const receipt = await callWhenServed<{ messageReceiptId: string }>(caller, {
        function_id: 'enqueue::job',
        payload: { order: 42 },
        action: TriggerAction.Enqueue({ queue: 'orders' }),
      });
      expect(Object.keys(receipt)).toEqual(['messageReceiptId']);
      expect(receipt.messageReceiptId).toMatch(/^[0-9a-f-]{36}$/);
      const input = received.at(-1);
      expect(input).toMatchObject({ queue: 'orders', function_id: 'enqueue::job', data: { order: 42 }, messageReceiptId: receipt.messageReceiptId });
      expect(Object.keys(input ?? {}).sort()).toEqual(['baggage', 'data', 'function_id', 'messageReceiptId', 'queue', 'traceparent']);
      expect(String(input?.baggage)).toContain('iii.function.id=enqueue%3A%3Ajob');
      expect(ran).toBe(0);

      // A provider's failure reaches the caller as enqueue_error naming the provider's own error.
      const refused = caller.trigger({ function_id: 'enqueue::job', payload: {}, action: TriggerAction.Enqueue({ queue: 'refusing' }) });
      await expect(refused).rejects.toMatchObject({ code: 'enqueue_error' });
      await expect(refused).rejects.toThrow(/the queue is full/);
      expect(ran).toBe(0);
    });
  });
});
