/**
 * Bad input from workers (the reliability issue's worker-side suite), over a real engine. Each test
 * checks the exact behaviour and that the engine keeps serving: a bystander worker's route answers
 * 200 and its socket stays open.
 *
 * Where each item is covered:
 * - Oversized frames: worker-protocol.test.ts "refuses a frame above max_frame_bytes by closing with
 *   1009" checks the close code only; here: the exact limit, a length announced in a frame header
 *   without its payload, fragments adding up past the limit, the offender's routes and pending calls
 *   removed, other workers untouched.
 * - Malformed frames: worker-protocol.test.ts "logs and ignores malformed frames and unknown types"
 *   (one of each kind), test/unit/protocol.test.ts (the decoder, including property-based inputs);
 *   here: floods of 50,000 small frames and of 5,000 invalid ones, with HTTP latency and memory.
 * - Invalid uuids in invocation_id and worker ids: test/unit/protocol.test.ts "rejects a non-string or
 *   empty invocation_id" (decoder only); here: what the engine does with each over a socket.
 * - Results for invocations the worker was never sent, and for another worker's invocation: here.
 * - Thousands of routes from one worker: here (5,000, servable, and all gone on disconnect).
 * - Names that are Object.prototype members (`__proto__`, `constructor`, …) as function ids, paths,
 *   route parameters, trigger types, phases and engine-function inputs: here; the RBAC auth input:
 *   test/security/rbac.test.ts.
 * - Worker token: worker-protocol.test.ts "worker token" checks a missing token and the right one;
 *   here: wrong tokens and schemes, the exact reason, nothing registered by a refused socket.
 * - Issue 18, on a two-process engine (the last describe): /otel refused without the token (4401);
 *   its frames decoded by prefix and counted; a silent /otel socket dropped by the heartbeat; an
 *   upgrade whose headers trickle in closed with 408 within the bound of slow HTTP headers; 100
 *   sockets flooding /otel keep each child under 150 MB while HTTP keeps answering.
 */
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectErrorEnvelope } from '../support/assertions.js';
import { http, waitForStatus } from '../support/http.js';
import type { EngineHandle } from '../support/processes.js';
import { QUICK_GRACE_MS, spawnManaged, startEngine } from '../support/processes.js';
import { RawWorker, UUID_V4 } from '../support/raw-worker.js';
import { awaitLogLines, logLines, waitUntil } from '../support/logs.js';
import { sampleRss } from '../support/proc.js';
import { request } from 'undici';
import WebSocket from 'ws';

const MAX_FRAME_BYTES = 64 * 1024;
const UNAUTHORIZED_REASON = 'unauthorized: missing or invalid worker token';

/** Resident memory of a process, in MiB. */
function rssMiB(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (match === null) throw new Error(`no VmRSS for ${pid}`);
  return Number(match[1]) / 1024;
}

interface ServerFrame {
  opcode: number;
  payload: Buffer;
}

/**
 * A WebSocket upgrade done by hand on a bare TCP socket, to send frame headers no client library
 * would send. `frames` resolves with every frame the server sent, once it closes the connection.
 */
async function rawUpgrade(workerUrl: string): Promise<{ socket: Socket; frames: Promise<ServerFrame[]> }> {
  const { hostname, port } = new URL(workerUrl);
  const socket = connect({ host: hostname, port: Number(port) });
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  socket.write(
    'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
  );
  let buffer = Buffer.alloc(0);
  let headDone = false;
  const upgraded = new Promise<void>((resolve, reject) => {
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      if (headDone) return;
      const end = buffer.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = buffer.subarray(0, end).toString('latin1');
      buffer = buffer.subarray(end + 4);
      headDone = true;
      if (head.startsWith('HTTP/1.1 101')) resolve();
      else reject(new Error(`upgrade refused: ${head}`));
    });
  });
  const frames = new Promise<ServerFrame[]>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('server did not close the raw socket within 10 s')), 10_000);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(parseServerFrames(buffer));
    });
  });
  await upgraded;
  return { socket, frames };
}

/** Server frames are unmasked: opcode, 7/16/64-bit length, payload. */
function parseServerFrames(bytes: Buffer): ServerFrame[] {
  const out: ServerFrame[] = [];
  let offset = 0;
  while (offset + 2 <= bytes.length) {
    const opcode = (bytes[offset] as number) & 0x0f;
    let length = (bytes[offset + 1] as number) & 0x7f;
    let start = offset + 2;
    if (length === 126) {
      length = bytes.readUInt16BE(start);
      start += 2;
    } else if (length === 127) {
      length = Number(bytes.readBigUInt64BE(start));
      start += 8;
    }
    out.push({ opcode, payload: bytes.subarray(start, start + length) });
    offset = start + length;
  }
  return out;
}

/** A masked client text-frame header announcing `length` payload bytes (64-bit length form). */
function textFrameHeader(length: number): Buffer {
  const header = Buffer.alloc(14);
  header[0] = 0x81; // FIN + text
  header[1] = 0x80 | 127; // masked, 64-bit length follows
  header.writeBigUInt64BE(BigInt(length), 2);
  header.writeUInt32BE(0x01020304, 10); // mask key
  return header;
}

describe('bad input from workers', () => {
  let engine: EngineHandle;
  let childPid: number;
  let bystander: RawWorker;
  let bystanderId: string;
  const sockets: RawWorker[] = [];

  const connectWorker = async (headers?: Record<string, string>): Promise<RawWorker> => {
    const w = await RawWorker.connect(engine.workerUrl, headers);
    sockets.push(w);
    return w;
  };

  /** A worker serving `functionId` at GET `path` with `{ from: functionId }`, servable once this resolves. */
  const servingWorker = async (functionId: string, path: string): Promise<RawWorker> => {
    const w = await connectWorker();
    w.route(functionId, 'GET', path);
    w.serve(functionId, () => ({ status_code: 200, body: { from: functionId } }));
    await w.sync();
    await waitForStatus(`${engine.httpUrl}${path}`, (s) => s === 200);
    return w;
  };

  const workerIdOf = async (w: RawWorker): Promise<string> => (await w.ofType('workerregistered')).worker_id as string;

  /** The engine still serves, and the bystander worker was not touched: same socket, route answers. */
  const expectBystanderUntouched = async (): Promise<void> => {
    await bystander.sync();
    expect(bystander.ws.readyState).toBe(bystander.ws.OPEN);
    const res = await http(`${engine.httpUrl}/bystander`);
    expect({ status: res.status, body: res.json() }).toEqual({ status: 200, body: { from: 'by::stander' } });
    const workers = (await http(`${engine.adminUrl}/workers`)).json<{ id: string; functions: string[] }[]>();
    expect(workers.find((w) => w.id === bystanderId)?.functions).toEqual(['by::stander']);
  };

  beforeAll(async () => {
    engine = await startEngine({ workers: { max_frame_bytes: MAX_FRAME_BYTES, reconnect_grace_ms: QUICK_GRACE_MS }, api: { default_timeout: 15_000 } });
    childPid = (await http(`${engine.adminUrl}/readyz`)).json<{ children: { pid: number }[] }>().children[0]?.pid as number;
    bystander = await servingWorker('by::stander', '/bystander');
    bystanderId = await workerIdOf(bystander);
  });
  afterAll(async () => {
    await Promise.all(sockets.map((s) => s.close()));
    await engine?.stop();
  });

  describe('oversized frames', () => {
    it('accepts a frame of exactly max_frame_bytes', async () => {
      const w = await connectWorker();
      const frame = JSON.stringify({ type: 'ping', pad: '' });
      w.send(JSON.stringify({ type: 'ping', pad: 'x'.repeat(MAX_FRAME_BYTES - frame.length) }));
      expect(await w.ofType('pong')).toEqual({ type: 'pong' });
      await expectBystanderUntouched();
    });

    it.each<[string, (w: RawWorker) => void]>([
      ['one frame one byte over the limit', (w) => w.send(JSON.stringify({ type: 'ping', pad: 'x'.repeat(MAX_FRAME_BYTES) }).slice(0, MAX_FRAME_BYTES + 1))],
      [
        'fragments that add up past the limit',
        (w) => {
          for (let i = 0; i < 40; i++) w.ws.send('x'.repeat(2048), { fin: false });
        },
      ],
    ])('closes a worker sending %s with 1009, removes its routes, fails its pending calls, and leaves others alone', async (_name, sendTooBig) => {
      const w = await servingWorker('big::served', '/big/served');
      w.route('big::held', 'GET', '/big/held'); // never answered: pending when the socket goes
      await w.sync();
      const held = http(`${engine.httpUrl}/big/held`);
      await w.next((f) => f.type === 'invokefunction' && f.function_id === 'big::held');

      sendTooBig(w);
      expect(await w.closed).toEqual({ code: 1009, reason: '' });
      expectErrorEnvelope(await held, 502, 'WORKER_DISCONNECTED');
      const gone = await waitForStatus(`${engine.httpUrl}/big/served`, (s) => s === 404);
      expectErrorEnvelope(gone, 404, 'NOT_FOUND');
      await engine.stdout.waitFor((l) => l.includes('"msg":"worker socket error"') && l.includes('Max payload size exceeded'));
      await expectBystanderUntouched();
    });

    it('closes with 1009 on a frame header announcing 1 GiB, without waiting for the payload', async () => {
      const raw = await rawUpgrade(engine.workerUrl);
      const startedAt = performance.now();
      raw.socket.write(textFrameHeader(2 ** 30));
      const frames = await raw.frames;
      expect(performance.now() - startedAt).toBeLessThan(5000);
      const registered = frames[0];
      expect(registered?.opcode).toBe(0x1);
      expect(JSON.parse(registered?.payload.toString('utf8') ?? '')).toMatchObject({ type: 'workerregistered', worker_id: expect.stringMatching(UUID_V4) });
      const close = frames.at(-1);
      expect(close?.opcode).toBe(0x8);
      expect(close?.payload.readUInt16BE(0)).toBe(1009);
      await expectBystanderUntouched();
    });
  });

  // Loose bounds for a shared 2-core machine: a stuck event loop would take longer, a leak hundreds
  // of MiB. Measured under load: up to ~0.9 s during the 50,000 pings (ws hands the engine every
  // frame of a read at once, so one worker's burst delays everyone's requests), ~40 ms otherwise.
  const MAX_LATENCY_MS = 3000;
  const MAX_RSS_GROWTH_MIB = 100;

  describe('floods', () => {
    /**
     * A worker in its own process sends `count` frames in one burst, cycling through `kinds`, then a
     * ping, and exits once it has as many pongs as pings it sent: the engine answers one socket's
     * frames in order, so the last pong means every frame before it was handled and the socket is
     * still open. The test process stays free to measure HTTP latency meanwhile.
     */
    const FLOODER = `
      import WebSocket from 'ws';
      const kinds = JSON.parse(process.env.FLOOD_KINDS);
      const frames = Array.from({ length: Number(process.env.FLOOD_COUNT) }, (_, i) => kinds[i % kinds.length]);
      const expected = frames.filter((f) => f === '{"type":"ping"}').length + 1;
      const ws = new WebSocket(process.env.FLOOD_URL);
      let pongs = 0;
      ws.on('message', (data) => {
        const text = data.toString('utf8');
        if (text === '{"type":"pong"}') {
          if (++pongs === expected) {
            console.log(JSON.stringify({ pongs }));
            ws.close();
          }
          return;
        }
        const frame = JSON.parse(text);
        if (frame.type !== 'workerregistered') return console.log(JSON.stringify({ unexpected: frame }));
        console.log(JSON.stringify({ workerId: frame.worker_id }));
        for (const f of frames) ws.send(f);
        ws.send('{"type":"ping"}');
      });
      ws.on('close', (code) => process.exit(pongs === expected ? 0 : 10 + (code % 100)));
    `;

    async function flood(kinds: string[], count: number): Promise<{ workerId: string; pongs: number; latenciesMs: number[] }> {
      const p = spawnManaged(process.execPath, ['--input-type=module', '-e', FLOODER], {
        ...process.env,
        FLOOD_URL: engine.workerUrl,
        FLOOD_KINDS: JSON.stringify(kinds),
        FLOOD_COUNT: String(count),
      });
      const workerId = (JSON.parse(await p.stdout.waitFor((l) => l.includes('workerId'), 10_000, 'the flooder to connect')) as { workerId: string }).workerId;
      let finished = false;
      const exited = p.exited.finally(() => (finished = true));
      // Sequential GET /bystander requests while the engine works through the burst.
      const latenciesMs: number[] = [];
      while (!finished) {
        const startedAt = performance.now();
        const res = await http(`${engine.httpUrl}/bystander`);
        latenciesMs.push(performance.now() - startedAt);
        expect(res.status).toBe(200);
      }
      expect(await exited).toEqual({ code: 0, signal: null });
      expect(p.stdout.lines.filter((l) => l.includes('unexpected'))).toEqual([]);
      const { pongs } = JSON.parse(p.stdout.lines.find((l) => l.includes('pongs')) ?? '{}') as { pongs: number };
      return { workerId, pongs, latenciesMs };
    }

    it('answers 50,000 pings sent in one burst while HTTP stays responsive and memory bounded', async () => {
      const rssBefore = rssMiB(childPid);
      const FRAMES = 50_000;
      const result = await flood(['{"type":"ping"}'], FRAMES);
      expect(result.pongs).toBe(FRAMES + 1);
      expect(Math.max(...result.latenciesMs)).toBeLessThan(MAX_LATENCY_MS);
      expect(rssMiB(childPid) - rssBefore).toBeLessThan(MAX_RSS_GROWTH_MIB);
      await expectBystanderUntouched();
    });

    it('logs and drops 5,000 invalid frames sent in one burst, keeps the socket, and stays responsive', async () => {
      const rssBefore = rssMiB(childPid);
      const invalid = [
        '{not json',
        '[1,2,3]',
        '"a string"',
        '{"no_type":true}',
        '{"type":7}',
        '{"type":"registertrigger","id":"x"}',
        '{"type":"invocationresult","result":1}',
        '{"type":"invokefunction","invocation_id":5}',
      ];
      const FRAMES = 5_000;
      const result = await flood(invalid, FRAMES);
      expect(result.pongs).toBe(1); // answered after all 5,000, on the same open socket
      expect(Math.max(...result.latenciesMs)).toBeLessThan(MAX_LATENCY_MS);
      const warnings = await awaitLogLines(engine, (l) => l.msg === 'malformed worker frame ignored' && l.workerId === result.workerId, FRAMES);
      expect(warnings).toHaveLength(FRAMES);
      expect(warnings.every((l) => typeof l.reason === 'string')).toBe(true);
      // The log is not flooded: 10 warnings per connection and 10 s, the rest at debug.
      const warned = warnings.filter((l) => l.level === 40).length;
      expect(warned).toBeGreaterThanOrEqual(10);
      expect(warned).toBeLessThanOrEqual(20);
      expect(rssMiB(childPid) - rssBefore).toBeLessThan(MAX_RSS_GROWTH_MIB);
      await expectBystanderUntouched();
    });
  });

  describe('a worker that never reads its socket', () => {
    /** Sends pings as fast as the socket takes them for a while, without ever reading the pongs. */
    const DEAF = `
      import WebSocket from 'ws';
      const ws = new WebSocket(process.env.FLOOD_URL);
      ws.on('open', () => {
        ws._socket.pause(); // never read anything again
        const until = Date.now() + Number(process.env.FLOOD_MS);
        let sent = 0;
        const burst = () => {
          while (ws.readyState === WebSocket.OPEN && ws.bufferedAmount < 1 << 20 && Date.now() < until) {
            ws.send('{"type":"ping"}');
            sent++;
          }
          if (Date.now() < until && ws.readyState === WebSocket.OPEN) setTimeout(burst, 5);
          else {
            console.log(JSON.stringify({ sent }));
            process.exit(0);
          }
        };
        burst();
      });
    `;

    it('cannot grow the engine: reads from it pause while its pongs pile up, and the heartbeat drops it', async () => {
      const rssBefore = rssMiB(childPid);
      const p = spawnManaged(process.execPath, ['--input-type=module', '-e', DEAF], {
        ...process.env,
        FLOOD_URL: engine.workerUrl,
        FLOOD_MS: '8000',
      });
      const latenciesMs: number[] = [];
      let done = false;
      const exited = p.exited.finally(() => (done = true));
      while (!done) {
        const startedAt = performance.now();
        expect((await http(`${engine.httpUrl}/bystander`)).status).toBe(200);
        latenciesMs.push(performance.now() - startedAt);
        await new Promise((r) => setTimeout(r, 50));
      }
      await exited;
      const { sent } = JSON.parse(p.stdout.lines.find((l) => l.includes('sent')) ?? '{}') as { sent: number };
      // Without back-pressure the engine queued every pong: measured +500 MiB for 2 M pings.
      expect(rssMiB(childPid) - rssBefore).toBeLessThan(MAX_RSS_GROWTH_MIB);
      expect(sent).toBeGreaterThan(100_000);
      expect(logLines(engine, (l) => l.msg === 'worker is not reading its socket: pausing reads from it until it catches up').length).toBeGreaterThan(0);
      // Until reads pause, the child works through ~50,000 pings' worth of pongs in one go: on a loaded
      // 2-core machine (the whole suite running) that measured up to 4.3 s.
      expect(Math.max(...latenciesMs)).toBeLessThan(2 * MAX_LATENCY_MS);
      await expectBystanderUntouched();
    });
  });

  describe('invalid ids', () => {
    it('echoes a non-uuid invocation_id of a call a worker makes, and drops a non-string or empty one', async () => {
      const w = await connectWorker();
      const workerId = await workerIdOf(w);
      w.send({ type: 'invokefunction', invocation_id: 42, function_id: 'nobody::here', data: {} });
      w.send({ type: 'invokefunction', invocation_id: '', function_id: 'nobody::here', data: {} });
      w.send({ type: 'invokefunction', invocation_id: 'not-a-uuid', function_id: 'nobody::here', data: {} });
      // Results come in call order: once the last one's is here, the first two had none.
      const result = await w.ofType('invocationresult');
      expect(result).toEqual({
        type: 'invocationresult',
        invocation_id: 'not-a-uuid',
        function_id: 'nobody::here',
        error: { code: 'function_not_found', message: 'no connected worker serves nobody::here' },
      });
      await w.sync();
      expect(w.frames.filter((f) => f.type === 'invocationresult')).toEqual([]);
      const reasons = (await awaitLogLines(engine, (l) => l.msg === 'malformed worker frame ignored' && l.workerId === workerId, 2)).map((l) => l.reason);
      expect(reasons).toEqual(['invokefunction "invocation_id" must be a string', 'invokefunction "invocation_id" must be a string']);
      await expectBystanderUntouched();
    });

    it('ignores results whose invocation_id is not one it sent (non-uuid, number, empty) and settles the call with the real one', async () => {
      const w = await connectWorker();
      const workerId = await workerIdOf(w);
      w.route('ids::held', 'GET', '/ids/held');
      await w.sync();
      const pending = http(`${engine.httpUrl}/ids/held`);
      const call = await w.next((f) => f.type === 'invokefunction' && f.function_id === 'ids::held');
      expect(call.invocation_id).toMatch(UUID_V4);
      const forged = { status_code: 200, body: 'forged' };
      w.send({ type: 'invocationresult', invocation_id: 'not-a-uuid', function_id: 'ids::held', result: forged });
      w.send({ type: 'invocationresult', invocation_id: call.invocation_id.toUpperCase(), function_id: 'ids::held', result: forged });
      w.send({ type: 'invocationresult', invocation_id: 7, function_id: 'ids::held', result: forged });
      w.send({ type: 'invocationresult', invocation_id: '', function_id: 'ids::held', result: forged });
      await w.sync();
      w.send({ type: 'invocationresult', invocation_id: call.invocation_id, function_id: 'ids::held', result: { status_code: 200, body: 'real' } });
      const res = await pending;
      expect({ status: res.status, body: res.json() }).toEqual({ status: 200, body: 'real' });
      const ignored = await awaitLogLines(engine, (l) => l.msg === 'result for an invocation not pending here ignored' && l.workerId === workerId, 2);
      expect(ignored.map((l) => l.invocationId)).toEqual(['not-a-uuid', call.invocation_id.toUpperCase()]);
      const malformed = await awaitLogLines(engine, (l) => l.msg === 'malformed worker frame ignored' && l.workerId === workerId, 2);
      expect(malformed.map((l) => l.reason)).toEqual(['invocationresult needs "invocation_id"', 'invocationresult needs "invocation_id"']);
      await expectBystanderUntouched();
    });

    it('ignores a reattach naming a non-uuid, its own or an unknown worker id, and keeps the connection and its routes', async () => {
      const w = await servingWorker('ids::reattacher', '/ids/reattacher');
      const workerId = await workerIdOf(w);
      w.send({ type: 'reattach', previous_worker_id: 'not-a-uuid', reattach_token: 'x' });
      w.send({ type: 'reattach', previous_worker_id: workerId, reattach_token: 'x' });
      w.send({ type: 'reattach', previous_worker_id: '00000000-0000-4000-8000-000000000000' });
      w.send({ type: 'reattach', previous_worker_id: 42 });
      // The bystander's real id with a token that is no uuid: a wrong token, so the bystander stays.
      w.send({ type: 'reattach', previous_worker_id: bystanderId, reattach_token: '../../etc' });
      await w.sync();
      const lines = await awaitLogLines(engine, (l) => l.workerId === workerId && typeof l.msg === 'string' && /reattach|malformed/.test(l.msg), 5);
      expect(lines.map((l) => [l.msg, l.previousWorkerId ?? l.reason])).toEqual([
        ['worker reattached (previous connection already gone)', 'not-a-uuid'],
        ['worker reattached (previous connection already gone)', workerId],
        ['worker reattached (previous connection already gone)', '00000000-0000-4000-8000-000000000000'],
        ['malformed worker frame ignored', 'reattach needs "previous_worker_id"'],
        ['reattach with a wrong token ignored', bystanderId],
      ]);
      const res = await http(`${engine.httpUrl}/ids/reattacher`);
      expect({ status: res.status, body: res.json() }).toEqual({ status: 200, body: { from: 'ids::reattacher' } });
      expect(w.ws.readyState).toBe(w.ws.OPEN);
      await expectBystanderUntouched();
    });
  });

  describe('results a worker was never sent', () => {
    it('does not let a worker answer an HTTP call sent to another worker', async () => {
      const owner = await connectWorker();
      owner.route('own::held', 'GET', '/own/held');
      await owner.sync();
      const impostor = await connectWorker();
      const impostorId = await workerIdOf(impostor);
      const pending = http(`${engine.httpUrl}/own/held`);
      const call = await owner.next((f) => f.type === 'invokefunction' && f.function_id === 'own::held');
      impostor.send({ type: 'invocationresult', invocation_id: call.invocation_id, function_id: 'own::held', result: { status_code: 200, body: 'forged' } });
      impostor.send({ type: 'invocationresult', invocation_id: call.invocation_id, function_id: 'own::held', error: { code: 'invocation_failed', message: 'forged' } });
      await impostor.sync();
      await engine.stdout.waitFor((l) => l.includes('result for an invocation not pending here ignored') && l.includes(impostorId) && l.includes(call.invocation_id));
      // Had the forgery settled the call, this answer would find nothing pending and the body would be "forged".
      owner.send({ type: 'invocationresult', invocation_id: call.invocation_id, function_id: 'own::held', result: { status_code: 200, body: 'owner' } });
      const res = await pending;
      expect({ status: res.status, body: res.json() }).toEqual({ status: 200, body: 'owner' });
      // A second answer to an already settled call is ignored too, and the route keeps working.
      owner.send({ type: 'invocationresult', invocation_id: call.invocation_id, function_id: 'own::held', result: { status_code: 500, body: 'late' } });
      owner.serve('own::held', () => ({ status_code: 200, body: 'again' }));
      expect((await http(`${engine.httpUrl}/own/held`)).json()).toBe('again');
      expect(impostor.ws.readyState).toBe(impostor.ws.OPEN);
      await expectBystanderUntouched();
    });

    it('does not let a worker answer a worker-to-worker call sent to another worker, nor its own outgoing call', async () => {
      const callee = await connectWorker();
      callee.send({ type: 'registerfunction', id: 'w2w::callee' });
      await callee.sync();
      const caller = await connectWorker();
      const impostor = await connectWorker();
      caller.send({ type: 'invokefunction', invocation_id: 'caller-1', function_id: 'w2w::callee', data: { n: 1 } });
      const call = await callee.ofType('invokefunction');
      expect(call.invocation_id).not.toBe('caller-1'); // the engine's own id, not the caller's
      impostor.send({ type: 'invocationresult', invocation_id: call.invocation_id, function_id: 'w2w::callee', result: 'forged' });
      caller.send({ type: 'invocationresult', invocation_id: 'caller-1', function_id: 'w2w::callee', result: 'self-answered' });
      caller.send({ type: 'invocationresult', invocation_id: call.invocation_id, function_id: 'w2w::callee', result: 'forged by caller' });
      await Promise.all([impostor.sync(), caller.sync()]);
      callee.send({ type: 'invocationresult', invocation_id: call.invocation_id, function_id: 'w2w::callee', result: { n: 2 } });
      expect(await caller.ofType('invocationresult')).toEqual({ type: 'invocationresult', invocation_id: 'caller-1', function_id: 'w2w::callee', result: { n: 2 } });
      await caller.sync();
      expect(caller.frames.filter((f) => f.type === 'invocationresult')).toEqual([]);
      await expectBystanderUntouched();
    });
  });

  describe('names that are Object.prototype members', () => {
    const NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'prototype', 'valueOf'];

    it('serves functions, routes, parameters and trigger types with such names as data, and keeps serving', async () => {
      const w = await connectWorker();
      for (const name of NAMES) {
        w.route(name, 'GET', `/proto-names/${name}`);
        w.serve(name, () => ({ status_code: 200, body: { served: name } }));
        w.route(`param::${name}`, 'GET', `/proto-params/${name}/:${name}`);
        w.serve(`param::${name}`, (data: { path_params: Record<string, string> }) => ({ status_code: 200, body: { params: data.path_params } }));
        w.send({ type: 'registertriggertype', id: name, description: name });
        w.send({ type: 'registerservice', id: name, name });
        // A phase that is not one: refused, whatever it is called.
        w.send({ type: 'registertrigger', id: `mw-${name}`, trigger_type: 'http_middleware', function_id: name, config: { phase: name, scope: { path: '/*' } } });
        w.send(`{"type":"invocationresult","invocation_id":"${name}","function_id":"${name}","result":{"${name}":1}}`);
        w.send(`{"type":"invokefunction","invocation_id":"log-${name}","function_id":"engine::log::info","data":{"message":"m","data":{"${name}":1},"${name}":2}}`);
        w.send(`{"type":"invokefunction","invocation_id":"reg-${name}","function_id":"engine::workers::register","data":{"${name}":1,"name":{"${name}":1}}}`);
      }
      await w.sync();
      for (const name of NAMES) {
        const served = await waitForStatus(`${engine.httpUrl}/proto-names/${name}`, (st) => st === 200);
        expect(served.json()).toEqual({ served: name });
        const params = await waitForStatus(`${engine.httpUrl}/proto-params/${name}/v-${name}`, (st) => st === 200);
        expect(JSON.stringify(params.json())).toBe(`{"params":{"${name}":"v-${name}"}}`);
      }
      w.send({ type: 'invokefunction', invocation_id: 'info-1', function_id: 'engine::functions::info', data: { function_id: 'constructor' } });
      const info = await w.next((f) => f.type === 'invocationresult' && f.invocation_id === 'info-1');
      expect(info.result?.function_id).toBe('constructor');
      w.send({ type: 'invokefunction', invocation_id: 'types-1', function_id: 'engine::triggers::list', data: {} });
      const types = await w.next((f) => f.type === 'invocationresult' && f.invocation_id === 'types-1');
      expect(JSON.stringify(types.result ?? types.error)).toContain('hasOwnProperty');
      expect(w.ws.readyState).toBe(w.ws.OPEN);
      await expectBystanderUntouched();
      await w.close();
    });
  });

  describe('thousands of routes from one worker', () => {
    it('serves 5,000 routes registered in one burst and removes every one of them when the worker leaves', async () => {
      const ROUTES = 5_000;
      const w = await connectWorker();
      const startedAt = performance.now();
      for (let i = 0; i < ROUTES; i++) {
        w.route(`many::${i}`, 'GET', `/many/${i}/:name`);
        w.serve(`many::${i}`, (req: { path_params: { name: string } }) => ({ status_code: 200, body: { i, name: req.path_params.name } }));
      }
      await w.sync();
      await waitForStatus(`${engine.httpUrl}/many/${ROUTES - 1}/last`, (s) => s === 200, {}, 10_000);
      expect(performance.now() - startedAt).toBeLessThan(10_000);
      expect(w.frames.filter((f) => f.type === 'triggerregistrationresult')).toEqual([]);

      type RouteView = { method: string; path: string; function_id: string };
      const manyRoutes = async (): Promise<RouteView[]> =>
        (await http(`${engine.adminUrl}/routes`)).json<{ routes: RouteView[] }>().routes.filter((r) => r.path.startsWith('/many/'));
      const listed = await manyRoutes();
      expect(listed).toHaveLength(ROUTES);
      expect(new Set(listed.map((r) => r.function_id)).size).toBe(ROUTES);

      // Every route answers, from its own function (32 requests in flight at a time).
      let next = 0;
      await Promise.all(
        Array.from({ length: 32 }, async () => {
          for (let i = next++; i < ROUTES; i = next++) {
            const res = await http(`${engine.httpUrl}/many/${i}/n${i}`);
            expect({ status: res.status, body: res.json() }).toEqual({ status: 200, body: { i, name: `n${i}` } });
          }
        }),
      );

      await w.close();
      await waitUntil(async () => (await manyRoutes()).length === 0, 10_000, 'the 5,000 routes to be removed');
      for (const i of [0, 1234, ROUTES - 1]) expectErrorEnvelope(await http(`${engine.httpUrl}/many/${i}/x`), 404, 'NOT_FOUND');
      await expectBystanderUntouched();
    });
  });
});

describe('worker token on the upgrade', () => {
  let engine: EngineHandle;
  let good: RawWorker;
  const sockets: RawWorker[] = [];

  beforeAll(async () => {
    engine = await startEngine({ workers: { auth_token: 's3cret', reconnect_grace_ms: QUICK_GRACE_MS } });
    good = await RawWorker.connect(engine.workerUrl, { authorization: 'Bearer s3cret' });
    sockets.push(good);
    good.route('tok::good', 'GET', '/tok/good');
    good.serve('tok::good', () => ({ status_code: 200, body: 'good' }));
    await good.sync();
  });
  afterAll(async () => {
    await Promise.all(sockets.map((s) => s.close()));
    await engine?.stop();
  });

  it.each<[string, Record<string, string>]>([
    ['no Authorization header', {}],
    ['a wrong token', { authorization: 'Bearer wrong' }],
    ['the token with a suffix', { authorization: 'Bearer s3cret-and-more' }],
    ['a prefix of the token', { authorization: 'Bearer s3cre' }],
    ['an empty bearer token', { authorization: 'Bearer ' }],
    ['the token under another scheme', { authorization: 'Basic s3cret' }],
    ['the bare token', { authorization: 's3cret' }],
  ])('closes a worker presenting %s with 4401 before workerregistered, and registers nothing it sent', async (_name, headers) => {
    const refusalsBefore = logLines(engine, (l) => l.msg === 'worker refused: missing or invalid token').length;
    const w = await RawWorker.connect(engine.workerUrl, headers);
    sockets.push(w);
    // Sent the moment the socket opens, racing the close: none of it may reach the table.
    w.route('tok::intruder', 'GET', '/tok/intruder');
    w.serve('tok::intruder', () => ({ status_code: 200, body: 'intruder' }));
    expect(await w.closed).toEqual({ code: 4401, reason: UNAUTHORIZED_REASON });
    expect(w.frames).toEqual([]);
    await good.sync(); // the engine has handled whatever it read before this
    expectErrorEnvelope(await http(`${engine.httpUrl}/tok/intruder`), 404, 'NOT_FOUND');
    const refusals = await awaitLogLines(engine, (l) => l.msg === 'worker refused: missing or invalid token', refusalsBefore + 1);
    expect(refusals).toHaveLength(refusalsBefore + 1);
    expect(refusals.at(-1)).toMatchObject({ level: 40, remoteAddress: '127.0.0.1' });
    expect((await http(`${engine.httpUrl}/tok/good`)).json()).toBe('good');
  });

  it.each<[string, string]>([
    ['Bearer', 'Bearer s3cret'],
    ['lower-case bearer (schemes are case-insensitive, RFC 9110 §11.1)', 'bearer s3cret'],
  ])('accepts the right token with %s', async (_name, authorization) => {
    const w = await RawWorker.connect(engine.workerUrl, { authorization });
    sockets.push(w);
    expect((await w.ofType('workerregistered')).worker_id).toMatch(UUID_V4);
    w.route('tok::accepted', 'GET', '/tok/accepted');
    w.serve('tok::accepted', () => ({ status_code: 200, body: 'accepted' }));
    await w.sync();
    expect((await http(`${engine.httpUrl}/tok/accepted`)).json()).toBe('accepted');
    await w.close();
    await waitForStatus(`${engine.httpUrl}/tok/accepted`, (s) => s === 404);
    expect((await http(`${engine.httpUrl}/tok/good`)).json()).toBe('good');
  });
});

// Issue 18 (hardening the front doors), on a two-process engine with a worker token: /otel obeys
// the token and the heartbeat like /, its frames are decoded and counted, a flood of telemetry is
// held to a per-process budget (each child under 150 MB with 100 hostile sockets), and an upgrade
// whose headers trickle in is closed within the bound of slow HTTP headers.
/** 100 authenticated /otel sockets, each sending 48 KiB telemetry frames as fast as its socket takes them. */
const FLOOD = `
import WebSocket from 'ws';
const frame = Buffer.concat([Buffer.from('OTLP'), Buffer.alloc(48 * 1024, 0x7b)]);
let open = 0;
for (let i = 0; i < Number(process.env.SOCKETS); i++) {
  const ws = new WebSocket(process.env.URL, { headers: { authorization: 'Bearer ' + process.env.TOKEN } });
  ws.on('error', () => {});
  ws.on('open', () => {
    if (++open === Number(process.env.SOCKETS)) console.log('flooding');
    const pump = () => {
      while (ws.readyState === WebSocket.OPEN && ws.bufferedAmount < 1024 * 1024) ws.send(frame);
      if (ws.readyState === WebSocket.OPEN) setTimeout(pump, 5);
    };
    pump();
  });
}
`;

describe('the worker port under hostile clients (two processes)', () => {
  const TOKEN = 'otel-s3cret';
  const DEFAULT_TIMEOUT_MS = 2000;
  let engine: EngineHandle;
  let bystander: RawWorker;
  let children: number[];

  const otel = (headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` }): WebSocket => new WebSocket(`${engine.workerUrl}/otel`, { headers });
  const metric = async (name: string, labels = ''): Promise<number> => {
    const text = await (await request(`${engine.adminUrl}/metrics`)).body.text();
    return text
      .split('\n')
      .filter((line) => line.startsWith(name) && line.includes(labels) && !line.startsWith('#'))
      .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
  };

  beforeAll(async () => {
    engine = await startEngine({
      cluster: { processes: 2 },
      api: { default_timeout: DEFAULT_TIMEOUT_MS },
      workers: { auth_token: TOKEN, heartbeat_interval_ms: 300, heartbeat_timeout_ms: 1000 },
    });
    bystander = await RawWorker.connect(engine.workerUrl, { authorization: `Bearer ${TOKEN}` });
    bystander.route('hostile::ok', 'GET', '/hostile/ok');
    bystander.serve('hostile::ok', () => ({ status_code: 200, body: 'ok' }));
    await bystander.sync();
    await waitForStatus(`${engine.httpUrl}/hostile/ok`, (s) => s === 200);
    const ready = (await (await request(`${engine.adminUrl}/readyz`)).body.json()) as { children: { pid: number }[] };
    children = ready.children.map((c) => c.pid);
  });
  afterAll(async () => {
    await bystander?.close();
    await engine?.stop();
  });

  it('refuses /otel without the worker token with 4401, as it refuses /', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong' }] as Record<string, string>[]) {
      const ws = otel(headers);
      const [code, reason] = (await once(ws, 'close')) as [number, Buffer];
      expect([code, reason.toString()]).toEqual([4401, UNAUTHORIZED_REASON]);
    }
    const ws = otel();
    await once(ws, 'open');
    ws.close();
  });

  it('decodes /otel frames by prefix and counts them; anything else is malformed', async () => {
    const before = {
      traces: await metric('switchyard_telemetry_frames_total', 'kind="traces"'),
      malformed: await metric('switchyard_telemetry_frames_total', 'outcome="malformed"'),
    };
    const ws = otel();
    await once(ws, 'open');
    for (const prefix of ['OTLP', 'MTRC', 'LOGS']) ws.send(Buffer.concat([Buffer.from(prefix), Buffer.from('{"resourceSpans":[]}')]));
    ws.send(Buffer.from('JUNKnot telemetry'));
    ws.send('{"text":"frames are not telemetry"}');
    await waitUntil(async () => (await metric('switchyard_telemetry_frames_total', 'outcome="malformed"')) >= before.malformed + 2, 5000, 'the frames to be counted');
    expect(await metric('switchyard_telemetry_frames_total', 'kind="traces"')).toBe(before.traces + 1);
    expect(await metric('switchyard_telemetry_frames_total', 'kind="metrics",outcome="dropped"')).toBeGreaterThanOrEqual(1);
    ws.close();
  });

  it('drops a telemetry socket that answers no ping, as the heartbeat drops a frozen worker', async () => {
    const { hostname, port } = new URL(engine.workerUrl);
    const socket = connect({ host: hostname, port: Number(port) });
    socket.on('error', () => undefined);
    await once(socket, 'connect');
    socket.write(
      `GET /otel HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nAuthorization: Bearer ${TOKEN}\r\n` +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
    );
    // It answers no ping (the bytes it is sent are read and ignored, so the close can be seen):
    // dropped after heartbeat_timeout_ms, plus at most two intervals.
    socket.resume();
    const started = performance.now();
    await once(socket, 'close');
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it('closes an upgrade whose headers trickle in, within the bound of slow HTTP headers', async () => {
    const { hostname, port } = new URL(engine.workerUrl);
    const socket = connect({ host: hostname, port: Number(port) });
    socket.on('error', () => undefined);
    await once(socket, 'connect');
    socket.write('GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n');
    const trickle = setInterval(() => socket.write('X-Slow: a\r\n'), 300);
    const started = performance.now();
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    // Not once(socket, 'close'): that rejects on 'error', and a trickled line written after the
    // engine answered and closed is refused with a reset (ECONNRESET), which may come before 'close'.
    await new Promise<void>((resolve) => socket.once('close', () => resolve()));
    clearInterval(trickle);
    // min(10 s, default_timeout + 1 s), checked every second.
    expect(performance.now() - started).toBeLessThan(DEFAULT_TIMEOUT_MS + 1000 + 1500);
    expect(answer.startsWith('HTTP/1.1 408')).toBe(true);
  });

  it('keeps each child under 150 MB while 100 authenticated sockets flood /otel, and keeps serving', async () => {
    const throttledBefore = await metric('switchyard_telemetry_throttled_total');
    const peaks = sampleRss(children);
    // The flood comes from a process of its own, so this one (and its latency probes) stay responsive.
    const flood = spawnManaged(process.execPath, ['--input-type=module', '-e', FLOOD], { ...process.env, URL: `${engine.workerUrl}/otel`, TOKEN, SOCKETS: '100' });
    await flood.stdout.waitFor((line) => line === 'flooding', 10_000, 'the flood to start');
    const latencies: number[] = [];
    const until = performance.now() + 5000;
    while (performance.now() < until) {
      const started = performance.now();
      expect((await http(`${engine.httpUrl}/hostile/ok`)).status).toBe(200);
      latencies.push(performance.now() - started);
      await new Promise((r) => setTimeout(r, 100));
    }
    flood.child.kill('SIGKILL');
    await flood.exited;
    const peak = Math.max(...peaks.stop().values());
    expect(peak).toBeLessThan(150);
    expect(await metric('switchyard_telemetry_throttled_total')).toBeGreaterThan(throttledBefore);
    expect(Math.max(...latencies)).toBeLessThan(1000);
  }, 30_000);
});
