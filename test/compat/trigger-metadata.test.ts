// A trigger's `metadata` reaches its handler as the second argument for the engine modules' trigger
// types too, not only for http (iii engine/src/engine/mod.rs call_with_metadata; the state, cron,
// stream and stream connection modules pass the trigger's metadata). The real iii-sdk 0.22.1 in this
// process, against a two-process engine: the module that fires may run on the other process.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { freePort } from '../support/redis.js';
import { RawStreamClient } from '../support/stream-client.js';

// The SDK reads its OpenTelemetry switch at import: off, so no exporter dials the engine's /otel.
process.env.OTEL_ENABLED = 'false';
const { registerWorker } = await import('iii-sdk');
type Client = ReturnType<typeof registerWorker>;

const RECONNECT = { maxRetries: 3, initialDelayMs: 100, maxDelayMs: 1000 };

describe('trigger metadata for every module trigger type, two processes', () => {
  let engine: EngineHandle;
  let client: Client;
  let streamPort: number;
  /** The metadata each handler was called with, by trigger type. */
  const seen = new Map<string, unknown[]>();

  const handle = (type: string, config: Record<string, unknown>): void => {
    const functionId = `meta::${type.replace(':', '-')}`;
    seen.set(type, []);
    client.registerFunction(functionId, (_event: unknown, metadata?: unknown) => {
      seen.get(type)?.push(metadata);
      return Promise.resolve({});
    });
    client.registerTrigger({ type, function_id: functionId, config, metadata: { from: type, n: 1 } });
  };

  /** Until the handler of `type` has run (a registration reaches the other process later). */
  const received = async (type: string, fire: () => Promise<unknown>): Promise<unknown> => {
    await waitUntil(
      async () => {
        if ((seen.get(type)?.length ?? 0) > 0) return true;
        await fire();
        await new Promise((resolve) => setTimeout(resolve, 200));
        return (seen.get(type)?.length ?? 0) > 0;
      },
      15_000,
      `the ${type} handler to run`,
    );
    return seen.get(type)?.[0];
  };

  beforeAll(async () => {
    streamPort = await freePort();
    engine = await startEngine({
      cluster: { processes: 2 },
      logLevel: 'info',
      modules: [
        { name: 'iii-state', config: { adapter: { name: 'kv' } } },
        { name: 'iii-pubsub', config: { adapter: { name: 'local' } } },
        { name: 'iii-cron', config: { adapter: { name: 'kv' } } },
        { name: 'iii-stream', config: { host: '127.0.0.1', port: streamPort } },
        { name: 'iii-queue', config: { adapter: { name: 'builtin' } } },
      ],
    });
    client = registerWorker(engine.workerUrl, { reconnectionConfig: RECONNECT, workerName: 'metadata-modules' });
    handle('state', { scope: 'meta-scope' });
    handle('subscribe', { topic: 'meta.topic' });
    handle('cron', { expression: '* * * * * *' });
    handle('stream', { stream_name: 'meta-stream' });
    handle('stream:join', {});
    handle('durable:subscriber', { topic: 'meta.durable' });
  });
  afterAll(async () => {
    await client?.shutdown().catch(() => undefined);
    await engine?.stop();
  });

  it('state', async () => {
    let n = 0;
    const metadata = await received('state', () => client.trigger({ function_id: 'state::set', payload: { scope: 'meta-scope', key: 'k', value: n++ } }));
    expect(metadata).toEqual({ from: 'state', n: 1 });
  });

  it('subscribe (publish)', async () => {
    const metadata = await received('subscribe', () => client.trigger({ function_id: 'publish', payload: { topic: 'meta.topic', data: { hello: 1 } } }));
    expect(metadata).toEqual({ from: 'subscribe', n: 1 });
  });

  it('cron', async () => {
    const metadata = await received('cron', () => Promise.resolve());
    expect(metadata).toEqual({ from: 'cron', n: 1 });
  });

  it('stream (stream::set)', async () => {
    let n = 0;
    const metadata = await received('stream', () =>
      client.trigger({ function_id: 'stream::set', payload: { stream_name: 'meta-stream', group_id: 'g', item_id: 'i', data: { n: n++ } } }),
    );
    expect(metadata).toEqual({ from: 'stream', n: 1 });
  });

  it('stream:join (a client joins on the stream port)', async () => {
    const clients: RawStreamClient[] = [];
    try {
      const metadata = await received('stream:join', async () => {
        const joiner = await RawStreamClient.connect(`ws://127.0.0.1:${streamPort}/`);
        clients.push(joiner);
        joiner.join('s1', 'meta-stream', 'g');
        await joiner.synced('g');
      });
      expect(metadata).toEqual({ from: 'stream:join', n: 1 });
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });

  it('durable:subscriber (iii::durable::publish)', async () => {
    const metadata = await received('durable:subscriber', () => client.trigger({ function_id: 'iii::durable::publish', payload: { topic: 'meta.durable', data: { job: 1 } } }));
    expect(metadata).toEqual({ from: 'durable:subscriber', n: 1 });
  });
});
