// Issue 23, attack 5: a restricted RBAC tenant opens many channels and pushes large frames into them
// while its readers never read. Until 2026-11-26 a frame of any size up to max_frame_bytes (16 MiB)
// was handed whole to a waiting reader's socket and held there: 60 channels x 16 MB took a child from
// 138 MB to 1.12 GB until the 5-minute expiry. Now a channel socket takes messages of at most
// max_channel_frame_bytes, channels per worker and per listener are capped, and all channels of a
// process hold at most max_channel_buffer_bytes before their writers wait.
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../support/http.js';
import { legitRequests } from '../support/legit-load.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { childPids, isRunning, rssMb } from '../support/proc.js';
import { RawWorker } from '../support/raw-worker.js';
import { freePort } from '../support/redis.js';

const MiB = 1024 * 1024;
const RSS_BOUND_MB = 400;

interface Ref {
  channel_id: string;
  access_key: string;
}

describe('channel memory is bounded (issue 23, point 5)', () => {
  let engine: EngineHandle;
  let tenantUrl: string;
  let trusted: RawWorker;
  const tenants: RawWorker[] = [];
  const sockets: WebSocket[] = [];

  /** A tenant connection, once its process knows the auth function (it may be the other child, a moment behind). */
  const tenant = async (kind = 'tenant'): Promise<RawWorker> => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const worker = await RawWorker.connect(tenantUrl, { 'x-tenant': kind });
      tenants.push(worker);
      worker.send({ type: 'ping' });
      const first = await worker.next((f) => f.type === 'pong' || f.type === 'error', 30_000);
      if (first.type === 'pong') return worker;
      if (Date.now() > deadline) throw new Error(`tenant refused: ${JSON.stringify(first)}`);
      await worker.close().catch(() => undefined);
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  let calls = 0;
  const createChannel = async (worker: RawWorker): Promise<{ writer?: Ref; reader?: Ref; error?: { code: string; message: string } }> => {
    const invocationId = `ch-${++calls}`;
    worker.send({ type: 'invokefunction', invocation_id: invocationId, function_id: 'engine::channels::create', data: {} });
    const answer = await worker.next((f) => f.type === 'invocationresult' && f.invocation_id === invocationId, 30_000);
    return answer.error !== undefined ? { error: answer.error } : (answer.result as { writer: Ref; reader: Ref });
  };

  /** A channel socket; a reader's socket is paused at once: it never reads what it is sent. */
  const openEnd = (ref: Ref, dir: 'read' | 'write'): Promise<WebSocket> =>
    new Promise((resolve, reject) => {
      const ws = new WebSocket(`${tenantUrl}/ws/channels/${ref.channel_id}?key=${ref.access_key}&dir=${dir}`);
      sockets.push(ws);
      ws.on('error', () => undefined);
      ws.once('open', () => {
        if (dir === 'read') (ws as unknown as { _socket: { pause(): void } })._socket.pause();
        resolve(ws);
      });
      ws.once('close', (code) => reject(new Error(`channel socket closed before open: ${code}`)));
    });

  const pids = (): number[] => [engine.child.pid as number, ...childPids(engine.child.pid as number)];

  beforeAll(async () => {
    const port = await freePort();
    tenantUrl = `ws://127.0.0.1:${port}`;
    engine = await startEngine({
      logLevel: 'info',
      cluster: { processes: 2 },
      // max_channels as on a listener without rbac (256; 32 is the rbac default): the per-worker cap
      // (64) and the per-listener one are tested apart.
      modules: [{ name: 'iii-worker-manager', config: { host: '127.0.0.1', port, max_channels: 256, rbac: { auth_function_id: 'sec::auth', expose_functions: [] } } }],
    });
    trusted = await RawWorker.connect(engine.workerUrl);
    trusted.serve('sec::auth', (input: { headers?: Record<string, string> }) => {
      const kind = input.headers?.['x-tenant'];
      return kind === 'no-channels' ? { forbidden_functions: ['engine::channels::create'], context: { tenant: kind } } : { context: { tenant: kind } };
    });
    trusted.send({ type: 'registerfunction', id: 'sec::auth' });
    trusted.route('legit::hello', 'GET', '/legit');
    trusted.serve('legit::hello', () => ({ status_code: 200, body: { ok: true } }));
    await trusted.sync();
  });
  afterAll(async () => {
    for (const ws of sockets) ws.terminate();
    for (const worker of tenants) await worker.close().catch(() => undefined);
    await trusted?.close();
    await engine?.stop();
  });

  it('many channels x large frames nobody reads leave every process under its bound, and requests are answered', async () => {
    const before = pids();
    const workers = [await tenant(), await tenant()];
    const channels: { writer: Ref; reader: Ref }[] = [];
    for (const worker of workers) {
      for (let i = 0; i < 40; i++) {
        const made = await createChannel(worker);
        expect(made.error).toBeUndefined();
        channels.push(made as { writer: Ref; reader: Ref });
      }
    }
    // Legitimate requests all along.
    const legitLoad = legitRequests(`${engine.httpUrl}/legit`);

    // Half the channels: one 16 MiB frame each (max_frame_bytes) into a reader that never reads.
    const big = Buffer.alloc(16 * MiB, 1);
    const bigClosed: Promise<number>[] = [];
    for (const { writer, reader } of channels.slice(0, 40)) {
      await openEnd(reader, 'read');
      const ws = await openEnd(writer, 'write');
      bigClosed.push(new Promise((resolve) => ws.once('close', (code) => resolve(code))));
      ws.send(big, { binary: true });
    }
    // The other half: 256 KiB frames (max_channel_frame_bytes), 16 per channel, 160 MiB in all.
    const frame = Buffer.alloc(256 * 1024, 2);
    for (const { writer, reader } of channels.slice(40)) {
      await openEnd(reader, 'read');
      const ws = await openEnd(writer, 'write');
      for (let i = 0; i < 16; i++) ws.send(frame, { binary: true });
    }
    // Each 16 MiB frame is refused: the writer's socket is closed as too big (1009).
    const codes = await Promise.race([Promise.all(bigClosed), new Promise<number[]>((r) => setTimeout(() => r([]), 60_000))]);
    await new Promise((r) => setTimeout(r, 3000));
    const peak = Object.fromEntries(pids().map((pid) => [pid, Math.round(rssMb(pid))]));
    const legit = await legitLoad.stop();

    for (const pid of before) expect(isRunning(pid)).toBe(true);
    expect(pids().sort()).toEqual(before.sort());
    for (const mb of Object.values(peak)) expect(mb).toBeLessThan(RSS_BOUND_MB);
    expect(codes).toEqual(new Array(40).fill(1009));
    expect(legit.ok).toBeGreaterThan(0);
    expect(legit.failed).toBe(0);
    const metrics = await http(`${engine.adminUrl}/metrics`);
    expect(metrics.text).toMatch(/switchyard_channels_created_total [1-9]/);
    const buffered = [...metrics.text.matchAll(/^switchyard_channel_buffered_bytes(?:\{[^}]*\})? (\d+)/gm)].map((m) => Number(m[1]));
    expect(buffered.length).toBeGreaterThan(0);
    // Each process holds at most max_channel_buffer_bytes (64 MiB) plus the item in hand per channel.
    for (const bytes of buffered) expect(bytes).toBeLessThanOrEqual(64 * MiB + 80 * 2 * 256 * 1024);
  }, 180_000);

  it('caps channels per worker connection (max_channels_per_worker, 64), counted by reason', async () => {
    const worker = await tenant();
    for (let i = 0; i < 64; i++) expect((await createChannel(worker)).error).toBeUndefined();
    const refused = await createChannel(worker);
    expect(refused.error?.code).toBe('too_many_channels');
    expect(refused.error?.message).toContain('max_channels_per_worker');
    const metrics = await http(`${engine.adminUrl}/metrics`);
    expect(metrics.text).toMatch(/switchyard_channels_refused_total\{reason="per_worker"\} [1-9]/);
  });

  it('RBAC restricts engine::channels::create like any function (forbidden_functions)', async () => {
    const worker = await tenant('no-channels');
    const refused = await createChannel(worker);
    expect(refused.error?.code).toBe('FORBIDDEN');
    expect(await createChannel(await tenant())).toHaveProperty('writer');
  });

  it('caps channels per listener in each process (max_channels, 256), whichever of its workers holds them', async () => {
    let refused: { code: string; message: string } | undefined;
    for (let w = 0; w < 16 && refused === undefined; w++) {
      const worker = await tenant();
      for (let i = 0; i < 64 && refused === undefined; i++) refused = (await createChannel(worker)).error;
    }
    expect(refused?.code).toBe('too_many_channels');
    expect(refused?.message).toContain('max_channels)');
    const metrics = await http(`${engine.adminUrl}/metrics`);
    expect(metrics.text).toMatch(/switchyard_channels_refused_total\{reason="per_listener"\} [1-9]/);
  }, 60_000);
});
