import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { startEngine } from '../../test/support/processes.js';
import type { EngineHandle } from '../../test/support/processes.js';
import { freePort } from '../../test/support/redis.js';
import { RawWorker } from '../../test/support/raw-worker.js';
import { median } from '../lib/load.js';
import { smoke } from '../lib/options.js';
import type { CheckGroup, ScaleRow } from '../lib/report.js';
import { int, ms } from '../lib/report.js';
import { startBaseline } from '../lib/subjects.js';

/**
 * Stream fan-out (docs/stream.md): one change reaching SUBSCRIBERS clients joined to one stream group
 * on one engine process (`stream::send` from a raw worker), against baseline (7): a bare `ws` server
 * wrapping each published frame once and sending it to every subscriber. Both are driven and read by
 * the same clients in this process (frames are counted, not parsed), so the client side costs both
 * the same. Rounds alternate baseline / Switchyard; the ratio is taken within each round, then the
 * median.
 *   - throughput: MESSAGES changes published back to back, deliveries per second until every
 *     subscriber has all of them;
 *   - latency: changes one at a time, publish → the last subscriber's receipt, p50.
 */
const SUBSCRIBERS = smoke ? 100 : 1_000;
const MESSAGES = smoke ? 20 : 200;
const LATENCY_MESSAGES = smoke ? 10 : 50;
const ROUNDS = smoke ? 1 : 3;
const PAD = 'x'.repeat(100);

interface Publisher {
  publish(seq: number): void;
  close(): Promise<void>;
}

/** SUBSCRIBERS sockets, each joined (its first frame received), counting the frames after that. */
async function subscribe(url: string): Promise<{ counts: Int32Array; waitAll(frames: number, timeoutMs: number): Promise<void>; close(): void }> {
  const counts = new Int32Array(SUBSCRIBERS);
  const sockets: WebSocket[] = [];
  let waiter: { frames: number; resolve: () => void } | undefined;
  let reached = 0;
  await Promise.all(
    Array.from({ length: SUBSCRIBERS }, async (_, index) => {
      const socket = new WebSocket(url, { perMessageDeflate: false });
      sockets.push(socket);
      await once(socket, 'open');
      const synced = once(socket, 'message');
      socket.send(JSON.stringify({ type: 'join', data: { subscriptionId: `s${index}`, streamName: 'bench', groupId: 'room' } }));
      await synced;
      socket.on('message', () => {
        counts[index] = (counts[index] as number) + 1;
        if (waiter !== undefined && counts[index] === waiter.frames && ++reached === SUBSCRIBERS) waiter.resolve();
      });
    }),
  );
  return {
    counts,
    waitAll: (frames, timeoutMs) => {
      reached = counts.reduce((n, c) => n + (c >= frames ? 1 : 0), 0);
      if (reached === SUBSCRIBERS) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`only ${reached} of ${SUBSCRIBERS} subscribers got ${frames} frames`)), timeoutMs);
        waiter = {
          frames,
          resolve: () => {
            clearTimeout(timer);
            waiter = undefined;
            resolve();
          },
        };
      });
    },
    close: () => {
      for (const socket of sockets) socket.terminate();
    },
  };
}

interface Measured {
  deliveriesPerSecond: number;
  p50Ms: number;
}

async function measure(url: string, publisher: Publisher): Promise<Measured> {
  const subscribers = await subscribe(url);
  try {
    let frames = 0;
    const started = performance.now();
    for (let seq = 0; seq < MESSAGES; seq++) publisher.publish(seq);
    frames += MESSAGES;
    await subscribers.waitAll(frames, 120_000);
    const seconds = (performance.now() - started) / 1000;
    const latencies: number[] = [];
    for (let seq = 0; seq < LATENCY_MESSAGES; seq++) {
      const sent = performance.now();
      publisher.publish(seq);
      frames++;
      await subscribers.waitAll(frames, 30_000);
      latencies.push(performance.now() - sent);
    }
    return { deliveriesPerSecond: (MESSAGES * SUBSCRIBERS) / seconds, p50Ms: median(latencies) };
  } finally {
    subscribers.close();
  }
}

async function switchyardSide(): Promise<{ url: string; publisher: Publisher; engine: EngineHandle }> {
  const port = await freePort();
  const engine = await startEngine({
    cluster: { processes: 1 },
    logLevel: 'warn',
    modules: [{ name: 'iii-stream', config: { host: '127.0.0.1', port, max_connections: SUBSCRIBERS + 100 } }],
  });
  const worker = await RawWorker.connect(engine.workerUrl);
  let id = 0;
  return {
    url: `ws://127.0.0.1:${port}/`,
    engine,
    publisher: {
      publish: (seq) =>
        worker.send({
          type: 'invokefunction',
          invocation_id: `b${id++}`,
          function_id: 'stream::send',
          data: { stream_name: 'bench', group_id: 'room', type: 'tick', data: { seq, pad: PAD } },
        }),
      close: async () => {
        await worker.close();
      },
    },
  };
}

async function fanoutRows(): Promise<ScaleRow[]> {
  const baseline = await startBaseline('7-ws-broadcast.mjs');
  const sy = await switchyardSide();
  const baseUrl = baseline.origin.replace('http://', 'ws://');
  const basePublisherSocket = new WebSocket(`${baseUrl}/publish`, { perMessageDeflate: false });
  await once(basePublisherSocket, 'open');
  const basePublisher: Publisher = {
    publish: (seq) => basePublisherSocket.send(JSON.stringify({ seq, pad: PAD })),
    close: () => {
      basePublisherSocket.close();
      return Promise.resolve();
    },
  };
  try {
    const results: { base: Measured[]; sy: Measured[] } = { base: [], sy: [] };
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? (['base', 'sy'] as const) : (['sy', 'base'] as const);
      for (const side of order) results[side].push(side === 'base' ? await measure(`${baseUrl}/`, basePublisher) : await measure(sy.url, sy.publisher));
    }
    const throughputRatio = median(results.sy.map((r, i) => r.deliveriesPerSecond / (results.base[i]?.deliveriesPerSecond as number)));
    const latencyRatio = median(results.sy.map((r, i) => r.p50Ms / (results.base[i]?.p50Ms as number)));
    const rate = (side: 'base' | 'sy'): number => median(results[side].map((r) => r.deliveriesPerSecond));
    const p50 = (side: 'base' | 'sy'): number => median(results[side].map((r) => r.p50Ms));
    return [
      {
        check: `(g) stream fan-out to ${int(SUBSCRIBERS)} subscribers of one group, one process (stream::send)`,
        result:
          `${int(rate('sy'))} deliveries/s against baseline (7) bare ws broadcast ${int(rate('base'))}/s: ${throughputRatio.toFixed(2)} × (median of ${ROUNDS} per-round ratios, ${MESSAGES} changes back to back); ` +
          `one change at a time, publish → last subscriber p50 ${ms(p50('sy'))} ms against ${ms(p50('base'))} ms (${latencyRatio.toFixed(2)} ×)`,
        target: 'measured (ratio to (7))',
        pass: undefined,
      },
    ];
  } finally {
    await basePublisher.close();
    await sy.publisher.close();
    await sy.engine.stop();
    await baseline.stop();
  }
}

export const streamFanout: CheckGroup = { kind: 'check', name: 'stream fan-out: 1,000 subscribers against a bare ws broadcast', run: fanoutRows };
