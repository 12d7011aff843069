/**
 * docs/reliability.md#frozen-or-half-open-worker-heartbeat, on a two-process engine: a worker whose
 * main socket answers no ping while a call's response channel keeps moving data is busy streaming,
 * not frozen, and is kept, whichever child its channel socket lands on (the one holding its main
 * socket, or the other, which the heartbeat asks through the primary). Once the channel stops too,
 * or when there is no channel at all, the worker is dropped as before.
 *
 * The worker is written by hand: a `ws` client with `autoPong: false` is a worker whose event loop
 * never gets to its pings, which is what iii-sdk 0.22.1's channel writer does to a worker while it
 * streams on a starved CPU. Waits are on conditions (pings counted, log lines), never on durations.
 */
import { once } from 'node:events';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { waitForEveryProcess } from '../support/http.js';
import { logLines, waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine, stopAll } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';

const INTERVAL_MS = 200;
const TIMEOUT_MS = 1000;
/** Pings that span well over two timeouts: a worker silent that long would have been dropped twice. */
const PINGS_OVER_TWO_TIMEOUTS = Math.ceil((3 * TIMEOUT_MS) / INTERVAL_MS);
const KEPT = 'worker answers no ping but its channels move data: kept';
const DROPPED = 'dropping it as frozen';

type Ref = { channel_id: string; access_key: string };

describe('heartbeat: channel traffic is a sign of life (processes: 2)', () => {
  let engine: EngineHandle;
  let worker: RawWorker;
  let keepAlive: NodeJS.Timeout | undefined;
  let pings = 0;

  /** Frames on the main socket count as signs of life: sent while the test sets things up. */
  const speak = (on: boolean): void => {
    clearInterval(keepAlive);
    keepAlive = on ? setInterval(() => worker.send({ type: 'ping' }), INTERVAL_MS / 2) : undefined;
  };
  const drops = (): number => engine.stdout.lines.filter((line) => line.includes(DROPPED)).length;

  beforeAll(async () => {
    engine = await startEngine({
      cluster: { processes: 2 },
      workers: { heartbeat_interval_ms: INTERVAL_MS, heartbeat_timeout_ms: TIMEOUT_MS, reconnect_grace_ms: 0 },
    });
    worker = await RawWorker.connect(engine.workerUrl, {}, { autoPong: false });
    worker.ws.on('ping', () => pings++);
    speak(true);
    worker.route('hb::stream', 'GET', 'hb/stream');
    worker.serve('hb::ready', () => ({ status_code: 200, body: { ok: true } }));
    worker.route('hb::ready', 'GET', 'hb/ready');
    await worker.sync();
    await waitForEveryProcess(`${engine.httpUrl}/hb/ready`, 2);
  });
  afterAll(async () => {
    speak(false);
    await worker?.close();
    await stopAll(engine);
  });

  /** A request to the streaming route, its invocation on the worker, and the worker's writing socket on its response channel. */
  async function openStream(tag: string): Promise<{ invocationId: string; channel: WebSocket; body: Promise<number>; write: () => void; sent: () => number }> {
    const response = request(`${engine.httpUrl}/hb/stream?tag=${tag}`, { headersTimeout: 20_000, bodyTimeout: 20_000 });
    const frame = await worker.next((f) => f.type === 'invokefunction' && f.function_id === 'hb::stream' && f.data?.query_params?.tag === tag, 10_000);
    const ref = frame.data.response as Ref;
    const channel = new WebSocket(`${engine.workerUrl}/ws/channels/${ref.channel_id}?key=${encodeURIComponent(ref.access_key)}&dir=write`);
    channel.on('error', () => undefined);
    await once(channel, 'open');
    // The first binary item starts the response.
    let sent = 1024;
    channel.send(Buffer.alloc(1024, 1));
    const res = await response;
    expect(res.statusCode).toBe(200);
    let received = 0;
    const body = (async () => {
      for await (const chunk of res.body) received += (chunk as Buffer).length;
      return received;
    })();
    body.catch(() => undefined);
    const write = (): void => {
      sent += 1024;
      channel.send(Buffer.alloc(1024, 2));
    };
    return { invocationId: frame.invocation_id as string, channel, body, write, sent: () => sent };
  }

  it('keeps a worker that answers no ping while its call streams, with the channel socket on either child', async () => {
    const placements = new Set<string>();
    for (let attempt = 0; attempt < 6 && placements.size < 2; attempt++) {
      const stream = await openStream(`kept-${attempt}`);
      const writing = setInterval(stream.write, INTERVAL_MS / 4);
      const keptBefore = logLines(engine, (l) => l.msg === KEPT).length;
      const dropsBefore = drops();
      // From here the main socket says nothing, pongs included; only the channel moves data.
      speak(false);
      const pingsBefore = pings;
      await waitUntil(() => pings - pingsBefore >= PINGS_OVER_TWO_TIMEOUTS || worker.ws.readyState !== WebSocket.OPEN, 20_000, `${PINGS_OVER_TWO_TIMEOUTS} pings`);
      // The heartbeat's lines travel on a pipe: wait for the one that kept it.
      await waitUntil(() => logLines(engine, (l) => l.msg === KEPT).length > keptBefore || worker.ws.readyState !== WebSocket.OPEN, 10_000, 'the worker kept');
      speak(true);
      expect(worker.ws.readyState, 'the worker was dropped while its channel moved data').toBe(WebSocket.OPEN);
      expect(drops()).toBe(dropsBefore);
      const kept = logLines(engine, (l) => l.msg === KEPT).slice(keptBefore);
      for (const line of kept) placements.add(String(line.seenOn));
      // The stream is whole: ended by the worker, its call answered.
      clearInterval(writing);
      stream.channel.close(1000, 'stream_complete');
      worker.send({ type: 'invocationresult', invocation_id: stream.invocationId, result: null });
      expect(await stream.body).toBe(stream.sent());
    }
    // Seen on the child holding the main socket, and on the other one (asked through the primary).
    expect([...placements].sort()).toEqual(['here', 'sibling']);
  }, 120_000);

  it('drops a worker that answers no ping once its channel stops moving data too; its stream is cut', async () => {
    const stream = await openStream('stopped');
    speak(false);
    // Nothing more on the channel (the socket stays open) and nothing on the main socket.
    const closed = await Promise.race([worker.closed, new Promise<undefined>((resolve) => setTimeout(resolve, 20_000, undefined))]);
    expect(closed, 'the worker was not dropped').toBeDefined();
    await waitUntil(() => drops() > 0, 5000, 'the drop logged');
    await expect(stream.body).rejects.toThrow();
    stream.channel.terminate();
  }, 60_000);

  it('drops a worker that answers no ping and has no channel at all', async () => {
    const quiet = await RawWorker.connect(engine.workerUrl, {}, { autoPong: false });
    const before = drops();
    const closed = await Promise.race([quiet.closed, new Promise<undefined>((resolve) => setTimeout(resolve, 20_000, undefined))]);
    expect(closed, 'the worker was not dropped').toBeDefined();
    await waitUntil(() => drops() > before, 5000, 'the drop logged');
  }, 60_000);
});
