import { RawJson } from '../../src/invocation/raw-json.js';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pino from 'pino';
import type { Logger } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ForwardResult, ForwardTarget } from '../../src/forwarding/forward-client.js';
import { ForwardClient } from '../../src/forwarding/forward-client.js';
import { FrameDecoder, encodeFrame } from '../../src/forwarding/forward-frames.js';
import type { ServerMessage } from '../../src/forwarding/forward-messages.js';
import { FORWARD_PROTOCOL_VERSION, HELLO_FEATURES, decodeClientMessage, decodeServerMessage, encodeCall, encodeHello, encodeResult } from '../../src/forwarding/forward-messages.js';
import { BINARY_KIND, encodeBinaryCall } from '../../src/forwarding/forward-binary.js';
import { waitUntil } from '../support/logs.js';
import { unpack } from 'msgpackr';
import { untouchedBody } from '../../src/protocol/answer-body.js';
import type { ForwardServerOptions } from '../../src/forwarding/forward-server.js';
import { ForwardServer } from '../../src/forwarding/forward-server.js';
import type { InvocationOutcome, InvokeOptions, Invoker } from '../../src/invocation/invoker.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SECRET = 'test-secret';
const CLUSTER = 'test-cluster';
const WAIT_MS = 5000;

// ---- helpers --------------------------------------------------------------------------------------

/** Rejects if `promise` has not settled within `ms`: every wait in these tests has a deadline. */
function within<T>(promise: Promise<T>, what: string, ms = WAIT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolveFn!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolveFn = r;
  });
  return { promise, resolve: resolveFn };
}

/** A pino logger whose JSON lines are kept, with a way to await one. */
class LogCapture {
  readonly entries: Record<string, unknown>[] = [];
  private waiters: { test: (e: Record<string, unknown>) => boolean; resolve: () => void }[] = [];
  readonly logger: Logger = pino({ level: 'debug' }, {
    write: (line: string) => {
      const entry = JSON.parse(line) as Record<string, unknown>;
      this.entries.push(entry);
      this.waiters = this.waiters.filter((w) => (w.test(entry) ? (w.resolve(), false) : true));
    },
  });

  count(msg: string): number {
    return this.entries.filter((e) => e.msg === msg).length;
  }

  waitFor(test: (e: Record<string, unknown>) => boolean, what: string): Promise<void> {
    if (this.entries.some(test)) return Promise.resolve();
    return within(new Promise<void>((resolvePromise) => this.waiters.push({ test, resolve: resolvePromise })), what);
  }
}

type Handler = (functionId: string, data: unknown, options: InvokeOptions) => Promise<InvocationOutcome>;

/** A local invoker with no worker: `handler` decides each outcome; calls and fires are recorded. */
class FakeInvoker implements Invoker {
  readonly calls: { functionId: string; data: unknown; options: InvokeOptions; at: number }[] = [];
  readonly fired: { functionId: string; data: unknown }[] = [];
  private waiters: { ready: () => boolean; resolve: () => void }[] = [];

  constructor(public handler: Handler = (_id, data) => Promise.resolve({ ok: true, value: data })) {}

  invoke(functionId: string, raw: unknown, options: InvokeOptions): Promise<InvocationOutcome> {
    // Forwarded data arrives as JSON text (RawJson); a real worker connection splices it in as is.
    const data: unknown = raw instanceof RawJson ? JSON.parse(raw.json) : raw;
    this.calls.push({ functionId, data, options, at: performance.now() });
    this.notify();
    return this.handler(functionId, data, options);
  }

  fire(functionId: string, raw: unknown): boolean {
    const data: unknown = raw instanceof RawJson ? JSON.parse(raw.json) : raw;
    this.fired.push({ functionId, data });
    this.notify();
    return true;
  }

  has(): boolean {
    return true;
  }

  waitUntil(ready: () => boolean, what: string): Promise<void> {
    if (ready()) return Promise.resolve();
    return within(new Promise<void>((resolvePromise) => this.waiters.push({ ready, resolve: resolvePromise })), what);
  }

  private notify(): void {
    this.waiters = this.waiters.filter((w) => (w.ready() ? (w.resolve(), false) : true));
  }
}

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'fwd-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

type Transport = 'unix' | 'tcp';

async function startServer(
  invoker: Invoker,
  transport: Transport = 'unix',
  extra: Partial<ForwardServerOptions> = {},
): Promise<{ server: ForwardServer; target: ForwardTarget; logs: LogCapture }> {
  const logs = new LogCapture();
  const options: ForwardServerOptions =
    transport === 'unix'
      ? { socketPath: join(await tempDir(), 'fwd.sock'), secret: SECRET, cluster: CLUSTER, invoker, logger: logs.logger, ...extra }
      : { tcp: { host: '127.0.0.1', port: 0 }, secret: SECRET, cluster: CLUSTER, invoker, logger: logs.logger, ...extra };
  const server = new ForwardServer(options);
  cleanups.push(() => server.close());
  const bound = await server.start();
  const target: ForwardTarget = transport === 'unix' ? { socketPath: bound.socketPath } : { host: '127.0.0.1', port: bound.port };
  return { server, target, logs };
}

function newClient(target: ForwardTarget, overrides: { secret?: string; cluster?: string; logger?: Logger } = {}): ForwardClient {
  const client = new ForwardClient(target, {
    secret: overrides.secret ?? SECRET,
    cluster: overrides.cluster ?? CLUSTER,
    selfPeerId: 'peer-test',
    logger: overrides.logger ?? pino({ level: 'silent' }),
  });
  cleanups.push(() => client.close());
  return client;
}

const soon = (ms = WAIT_MS): { deadline: number } => ({ deadline: performance.now() + ms });

const engine = (code: string): ForwardResult => ({
  dispatched: true,
  outcome: { ok: false, failure: { source: 'engine', code, message: expect.any(String) } },
}) as ForwardResult;

/** A hand-driven protocol client: sends raw bytes and collects what the server answers until it closes. */
async function rawConnection(target: ForwardTarget): Promise<{ socket: Socket; messages: ServerMessage[]; kinds: number[]; closed: Promise<void> }> {
  const socket = target.socketPath !== undefined ? connect({ path: target.socketPath }) : connect({ host: target.host as string, port: target.port as number });
  cleanups.push(() => socket.destroy());
  const messages: ServerMessage[] = [];
  /** Each frame's first body byte: a msgpack array (0x90 and up) or a binary form's kind. */
  const kinds: number[] = [];
  const decoder = new FrameDecoder();
  socket.on('data', (chunk: Buffer) =>
    decoder.push(chunk, (body) => {
      kinds.push(body[0] as number);
      messages.push(decodeServerMessage(body));
    }),
  );
  socket.on('error', () => undefined);
  const closed = once(socket, 'close').then(() => undefined);
  await within(once(socket, 'connect'), 'raw connect');
  return { socket, messages, kinds, closed };
}

const hello = (overrides: Partial<{ version: number; cluster: string; secret: string }> = {}): Buffer =>
  encodeHello({ version: FORWARD_PROTOCOL_VERSION, cluster: CLUSTER, secret: SECRET, peerId: 'raw-peer', ...overrides });

const call = (id: number, functionId = 'f'): Buffer =>
  encodeCall({ id, functionId, data: null, remainingMs: 1000, requestId: undefined, isVoid: false }, 1 << 20);

function lengthHeader(length: number): Buffer {
  const header = Buffer.alloc(4);
  header.writeUInt32BE(length);
  return header;
}

// ---- tests ----------------------------------------------------------------------------------------

describe.each<Transport>(['unix', 'tcp'])('forwarding over %s', (transport) => {
  it('round-trips values, the request id and the remaining deadline', async () => {
    const invoker = new FakeInvoker();
    const { target } = await startServer(invoker, transport);
    const client = newClient(target);
    const values: unknown[] = [null, 0, -1.5, 2 ** 40, 'héllo ✓', true, [1, [2, [3]]], { nested: { a: [null, 'x'], b: {} } }, 'x'.repeat(200_000)];
    for (const value of values) {
      const sentAt = performance.now();
      const result = await client.invoke('api::echo', value, { deadline: sentAt + 2000, requestId: 'req-42' });
      expect(result).toEqual({ dispatched: true, outcome: { ok: true, value } });
      const seen = invoker.calls.at(-1);
      expect(seen?.functionId).toBe('api::echo');
      expect(seen?.options.requestId).toBe('req-42');
      // Same machine, same clock: the rebuilt deadline is the sender's, give or take the 1 ms rounding.
      expect(seen?.options.deadline).toBeGreaterThan(sentAt + 1900);
      expect(seen?.options.deadline).toBeLessThanOrEqual(performance.now() + 2001);
    }
    expect(client.pendingCount).toBe(0);
  });

  it('returns every outcome kind as the peer saw it', async () => {
    const outcomes: Record<string, InvocationOutcome> = {
      ok: { ok: true, value: { status_code: 201 } },
      worker: { ok: false, failure: { source: 'worker', code: 'invocation_failed', message: 'boom', stacktrace: 'Error: boom\n    at handler' } },
      workerNoStack: { ok: false, failure: { source: 'worker', code: 'E_CUSTOM', message: 'nope' } },
      timeout: { ok: false, failure: { source: 'engine', code: 'TIMEOUT', message: 'worker too slow' } },
      disconnected: { ok: false, failure: { source: 'engine', code: 'WORKER_DISCONNECTED', message: 'worker left' } },
      shutting: { ok: false, failure: { source: 'engine', code: 'SHUTTING_DOWN', message: 'draining' } },
    };
    const invoker = new FakeInvoker((functionId) => Promise.resolve(outcomes[functionId] as InvocationOutcome));
    const { target } = await startServer(invoker, transport);
    const client = newClient(target);
    for (const [functionId, outcome] of Object.entries(outcomes)) {
      expect(await client.invoke(functionId, null, soon())).toEqual({ dispatched: true, outcome });
    }
  });

  it("hands a large worker answer over as the worker's frame, whose body stays bytes; a client of an older build gets the value", async () => {
    // As a worker connection resolves it: the value and the frame it was decoded from.
    const answer = (size: number): InvocationOutcome => {
      const frame = Buffer.from(JSON.stringify({ type: 'invocationresult', invocation_id: 'w-1', result: { status_code: 200, body: { items: 'y'.repeat(size) } } }));
      return { ok: true, value: JSON.parse(frame.toString()).result as unknown, frame };
    };
    const outcomes: Record<string, InvocationOutcome> = { small: answer(10), mid: answer(4096), large: answer(16 * 1024) };
    const invoker = new FakeInvoker((functionId) => Promise.resolve(outcomes[functionId] as InvocationOutcome));
    const { target } = await startServer(invoker, transport);
    const client = newClient(target);
    for (const [functionId, outcome] of Object.entries(outcomes)) {
      const result = await client.invoke(functionId, null, soon());
      const value = (result as { outcome: { value: Record<string, unknown> } }).outcome.value;
      // 16 KiB: the client kept the body as the worker's bytes (sent to HTTP as they are).
      expect(untouchedBody(value) !== undefined).toBe(functionId === 'large');
      expect(result).toEqual({ dispatched: true, outcome: { ok: true, value: (outcome as { value: unknown }).value } });
    }
    // A hello without the features field (a peer of an older build): the answer comes as a value.
    const raw = await rawConnection(target);
    const fields = unpack(hello().subarray(4)) as unknown[];
    raw.socket.write(encodeFrame(fields.slice(0, 7)));
    raw.socket.write(encodeCall({ id: 3, functionId: 'large', data: null, remainingMs: 1000, requestId: undefined, isVoid: false }, 1 << 20));
    await waitUntil(() => raw.messages.length >= 2, WAIT_MS, 'the answer to the older client');
    const [, answered] = raw.messages;
    expect(answered).toEqual({ kind: 'result', id: 3, outcome: { ok: true, value: (outcomes.large as { value: unknown }).value } });
    expect(untouchedBody((answered as { outcome: { value: Record<string, unknown> } }).outcome.value)).toBeUndefined();
  });

  it('answers in the binary form only a client whose hello reads it, and reads calls in either form', async () => {
    const { target } = await startServer(new FakeInvoker(), transport);
    const callFields = { functionId: 'api::echo', data: { v: 'é' }, remainingMs: 1000, requestId: 'r', isVoid: false };
    // features 1: a client of the previous build (result frames only); 3: this build's.
    for (const features of [HELLO_FEATURES.resultFrame, HELLO_FEATURES.resultFrame | HELLO_FEATURES.binary]) {
      const raw = await rawConnection(target);
      // A hello of its own (a nonce is accepted once), its features replaced.
      const fields = unpack(hello().subarray(4)) as unknown[];
      raw.socket.write(encodeFrame([...fields.slice(0, 7), features]));
      raw.socket.write(encodeCall({ id: 1, ...callFields }, 1 << 20));
      raw.socket.write(encodeBinaryCall({ id: 2, ...callFields }, 1 << 20));
      await waitUntil(() => raw.messages.length >= 3, WAIT_MS, 'both answers');
      expect(raw.messages.slice(1)).toEqual([1, 2].map((id) => ({ kind: 'result', id, outcome: { ok: true, value: { v: 'é' } } })));
      const binary = (features & HELLO_FEATURES.binary) !== 0;
      for (const kind of raw.kinds.slice(1)) expect(kind === BINARY_KIND.result).toBe(binary);
      raw.socket.destroy();
    }
  });

  it('sends calls in the binary form only to a server whose helloOk reads it', async () => {
    // A stand-in server: answers the hello as a server of this build (features 2) or of the previous one (none).
    for (const features of [undefined, HELLO_FEATURES.binary]) {
      const kinds: number[] = [];
      const server = createServer((socket) => {
        const decoder = new FrameDecoder();
        let greeted = false;
        socket.on('data', (chunk: Buffer) =>
          decoder.push(chunk, (body) => {
            if (!greeted) {
              greeted = true;
              socket.write(encodeFrame(features === undefined ? [1, FORWARD_PROTOCOL_VERSION] : [1, FORWARD_PROTOCOL_VERSION, features]));
              return;
            }
            kinds.push(body[0] as number);
            const message = decodeClientMessage(body);
            if (message.kind === 'call' && !message.isVoid) socket.write(encodeResult(message.id, { ok: true, value: message.functionId }, 1 << 20));
          }),
        );
        socket.on('error', () => undefined);
      });
      const listening = transport === 'unix' ? join(await tempDir(), 'stand-in.sock') : 0;
      await new Promise<void>((done) => (typeof listening === 'string' ? server.listen(listening, done) : server.listen(0, '127.0.0.1', done)));
      cleanups.push(() => new Promise<void>((done) => server.close(() => done())));
      const address = server.address();
      const target: ForwardTarget = typeof listening === 'string' ? { socketPath: listening } : { host: '127.0.0.1', port: (address as { port: number }).port };
      const client = newClient(target);
      expect(await client.invoke('api::one', null, soon())).toEqual({ dispatched: true, outcome: { ok: true, value: 'api::one' } });
      client.fire('api::two', null);
      expect(await client.invoke('api::three', null, soon())).toEqual({ dispatched: true, outcome: { ok: true, value: 'api::three' } });
      expect(kinds).toHaveLength(3);
      for (const kind of kinds) expect(kind === BINARY_KIND.call).toBe(features !== undefined);
      await client.close();
    }
  });

  it('reports FUNCTION_UNAVAILABLE on the peer as not dispatched, so another owner can be tried', async () => {
    const invoker = new FakeInvoker(() => Promise.resolve({ ok: false, failure: { source: 'engine', code: 'FUNCTION_UNAVAILABLE', message: 'no worker' } }));
    const { target } = await startServer(invoker, transport);
    const result = await newClient(target).invoke('gone', null, soon());
    expect(result).toEqual({ dispatched: false, reason: expect.stringContaining('no worker') });
  });

  it('answers 1000 concurrent calls on one connection, each with its own result', async () => {
    // Replies are delayed by a random number of loop turns, so they come back shuffled.
    const invoker = new FakeInvoker(async (_id, data) => {
      for (let turns = Math.floor(Math.random() * 4); turns > 0; turns--) await new Promise((r) => setImmediate(r));
      return { ok: true, value: { echo: data } };
    });
    const { target, logs } = await startServer(invoker, transport);
    const client = newClient(target);
    const warnings: Error[] = [];
    const onWarning = (warning: Error): void => void warnings.push(warning);
    process.on('warning', onWarning);
    cleanups.push(() => process.off('warning', onWarning));
    const requests = Array.from({ length: 1000 }, (_, n) => ({ n, pad: 'p'.repeat(n % 97) }));
    const results = await within(Promise.all(requests.map((data) => client.invoke('echo', data, soon()))), '1000 results');
    results.forEach((result, n) => expect(result).toEqual({ dispatched: true, outcome: { ok: true, value: { echo: requests[n] } } }));
    expect(logs.count('forward connection accepted')).toBe(1);
    expect(client.pendingCount).toBe(0);
    expect(warnings).toEqual([]); // e.g. MaxListenersExceededWarning, were listeners added per call
  });

  it('delivers results in the order the peer answers, not the order of the calls', async () => {
    const gates = new Map<string, ReturnType<typeof deferred<InvocationOutcome>>>();
    const invoker = new FakeInvoker((functionId) => {
      const gate = deferred<InvocationOutcome>();
      gates.set(functionId, gate);
      return gate.promise;
    });
    const { target } = await startServer(invoker, transport);
    const client = newClient(target);
    const settled: string[] = [];
    const track = (name: string): Promise<ForwardResult> =>
      client.invoke(name, null, soon()).then((result) => {
        settled.push(name);
        return result;
      });
    const [a, b, c] = [track('a'), track('b'), track('c')];
    await invoker.waitUntil(() => invoker.calls.length === 3, 'three calls on the peer');
    gates.get('c')?.resolve({ ok: true, value: 'C' });
    expect(await within(c, 'c')).toEqual({ dispatched: true, outcome: { ok: true, value: 'C' } });
    expect(settled).toEqual(['c']);
    gates.get('a')?.resolve({ ok: true, value: 'A' });
    await within(a, 'a');
    expect(settled).toEqual(['c', 'a']);
    gates.get('b')?.resolve({ ok: true, value: 'B' });
    await within(b, 'b');
    expect(settled).toEqual(['c', 'a', 'b']);
  });

  it('times a call out at its deadline and drops the late answer', async () => {
    const gate = deferred<InvocationOutcome>();
    const invoker = new FakeInvoker((functionId, data) => (functionId === 'slow' ? gate.promise : Promise.resolve({ ok: true, value: data })));
    const { target } = await startServer(invoker, transport);
    const client = newClient(target);
    const startedAt = performance.now();
    expect(await within(client.invoke('slow', null, { deadline: startedAt + 150 }), 'timeout')).toEqual(engine('TIMEOUT'));
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(150);
    expect(client.pendingCount).toBe(0);
    gate.resolve({ ok: true, value: 'late' });
    // The late answer reaches a client that no longer waits for it; the connection goes on serving.
    expect(await client.invoke('fast', 'next', soon())).toEqual({ dispatched: true, outcome: { ok: true, value: 'next' } });
  });
});

describe('forward client', () => {
  it('refuses a target or options it could never use', () => {
    const options = { secret: SECRET, cluster: CLUSTER, selfPeerId: 'p', logger: pino({ level: 'silent' }) };
    expect(() => new ForwardClient({ host: '127.0.0.1', port: 70_000 }, options)).toThrow(TypeError);
    expect(() => new ForwardClient({ host: '127.0.0.1' }, options)).toThrow(TypeError);
    expect(() => new ForwardClient({ socketPath: '/tmp/x.sock' }, { ...options, secret: '' })).toThrow(TypeError);
    expect(() => new ForwardServer({ secret: SECRET, cluster: CLUSTER, invoker: new FakeInvoker(), logger: options.logger })).toThrow(TypeError);
  });

  it('times out without sending when the deadline has already passed', async () => {
    const invoker = new FakeInvoker();
    const { target, logs } = await startServer(invoker);
    const client = newClient(target);
    expect(await client.invoke('f', null, { deadline: performance.now() - 1 })).toEqual(engine('TIMEOUT'));
    expect(invoker.calls).toHaveLength(0);
    expect(logs.count('forward connection accepted')).toBe(0);
  });

  it('treats a NaN deadline as passed and an infinite one as the longest timer', async () => {
    const invoker = new FakeInvoker();
    const { target } = await startServer(invoker);
    const client = newClient(target);
    expect(await client.invoke('f', null, { deadline: Number.NaN })).toEqual(engine('TIMEOUT'));
    expect(invoker.calls).toHaveLength(0);
    expect(await client.invoke('f', 'far', { deadline: Number.POSITIVE_INFINITY })).toEqual({ dispatched: true, outcome: { ok: true, value: 'far' } });
    expect(Number.isFinite(invoker.calls[0]?.options.deadline)).toBe(true);
  });

  it('gives up on a peer that accepts but never answers the hello', async () => {
    const dir = await tempDir();
    const silent = createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(join(dir, 'silent.sock'), r));
    cleanups.push(() => new Promise((r) => silent.close(r)));
    const client = new ForwardClient({ socketPath: join(dir, 'silent.sock') }, { secret: SECRET, cluster: CLUSTER, selfPeerId: 'p', logger: pino({ level: 'silent' }), connectTimeoutMs: 100 });
    cleanups.push(() => client.close());
    silent.on('connection', (socket) => cleanups.push(() => socket.destroy()));
    expect(await within(client.invoke('f', null, soon()), 'connect timeout')).toEqual({ dispatched: false, reason: expect.stringContaining('no handshake within 100 ms') });
  });

  it('drops a connection whose peer sends garbage, settling the calls written on it as disconnected', async () => {
    const dir = await tempDir();
    const socketPath = join(dir, 'garbage.sock');
    // Answers the hello properly, then meets the first call with bytes that are no frame.
    const fake = createServer((socket) => {
      cleanups.push(() => socket.destroy());
      let greeted = false;
      socket.on('data', () => {
        socket.write(greeted ? Buffer.from([0, 0, 0, 2, 0xc1, 0xc1]) : encodeFrame([1, FORWARD_PROTOCOL_VERSION]));
        greeted = true;
      });
    });
    await new Promise<void>((r) => fake.listen(socketPath, r));
    cleanups.push(() => new Promise((r) => fake.close(r)));
    const client = newClient({ socketPath });
    expect(await within(client.invoke('f', null, soon()), 'protocol error')).toEqual(engine('WORKER_DISCONNECTED'));
    expect(client.pendingCount).toBe(0);
  });

  it('reports not dispatched when nothing listens, backs off, then connects once a server is up', async () => {
    const socketPath = join(await tempDir(), 'later.sock');
    const client = newClient({ socketPath });
    expect(await client.invoke('f', null, soon())).toEqual({ dispatched: false, reason: expect.stringContaining('ENOENT') });
    expect(await client.invoke('f', null, soon())).toEqual({ dispatched: false, reason: expect.stringContaining('next attempt in') });

    const invoker = new FakeInvoker();
    const server = new ForwardServer({ socketPath, secret: SECRET, cluster: CLUSTER, invoker, logger: pino({ level: 'silent' }) });
    cleanups.push(() => server.close());
    await server.start();
    // The caller's next call after the backoff window connects; each try is a full call, not a sleep.
    const giveUpAt = performance.now() + WAIT_MS;
    let result = await client.invoke('f', 'up', soon());
    while (!result.dispatched && performance.now() < giveUpAt) {
      await new Promise((r) => setImmediate(r));
      result = await client.invoke('f', 'up', soon());
    }
    expect(result).toEqual({ dispatched: true, outcome: { ok: true, value: 'up' } });
  });

  it('reports not dispatched when a TCP port refuses the connection', async () => {
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const { port } = probe.address() as { port: number };
    await new Promise((r) => probe.close(r));
    const result = await newClient({ host: '127.0.0.1', port }).invoke('f', null, soon());
    expect(result).toEqual({ dispatched: false, reason: expect.stringContaining('ECONNREFUSED') });
  });

  it('reports a refused handshake as not dispatched, with the server reason', async () => {
    const { target } = await startServer(new FakeInvoker());
    expect(await newClient(target, { secret: 'wrong' }).invoke('f', null, soon())).toEqual({
      dispatched: false,
      reason: expect.stringContaining('wrong cluster secret'),
    });
    expect(await newClient(target, { cluster: 'other' }).invoke('f', null, soon())).toEqual({
      dispatched: false,
      reason: expect.stringContaining('wrong cluster name'),
    });
  });

  it('settles a call in flight as WORKER_DISCONNECTED when the peer process is killed, then reconnects', async () => {
    const socketPath = join(await tempDir(), 'child.sock');
    const script = `
      const { ForwardServer } = await import(${JSON.stringify(pathToFileURL(join(ROOT, 'src/forwarding/forward-server.ts')).href)});
      const { default: pino } = await import('pino');
      const invoker = {
        invoke() { process.send('invoked'); return new Promise(() => {}); },
        fire() { return true; },
        has() { return true; },
      };
      const server = new ForwardServer({ socketPath: process.env.FWD_SOCKET, secret: ${JSON.stringify(SECRET)}, cluster: ${JSON.stringify(CLUSTER)}, invoker, logger: pino({ level: 'silent' }) });
      await server.start();
      process.send('listening');
    `;
    const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: ROOT,
      env: { ...process.env, FWD_SOCKET: socketPath },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    cleanups.push(() => child.kill('SIGKILL'));
    const exited = once(child, 'exit');
    const nextMessage = (): Promise<unknown> => within(once(child, 'message').then(([m]) => m as unknown), 'child message', 20_000);
    expect(await nextMessage()).toBe('listening');

    const client = newClient({ socketPath });
    const inFlight = client.invoke('slow', null, soon(20_000));
    expect(await nextMessage()).toBe('invoked');
    child.kill('SIGKILL');
    expect(await within(inFlight, 'disconnect')).toEqual(engine('WORKER_DISCONNECTED'));
    expect(client.pendingCount).toBe(0);
    await within(exited, 'child exit');

    // A new peer at the same path (over the dead one's stale socket file) is reached by the next call.
    const invoker = new FakeInvoker();
    const server = new ForwardServer({ socketPath, secret: SECRET, cluster: CLUSTER, invoker, logger: pino({ level: 'silent' }) });
    cleanups.push(() => server.close());
    await server.start();
    expect(await client.invoke('f', 'again', soon())).toEqual({ dispatched: true, outcome: { ok: true, value: 'again' } });
  });

  it('close() settles written calls as disconnected and unwritten ones as not dispatched', async () => {
    const invoker = new FakeInvoker(() => new Promise<InvocationOutcome>(() => undefined));
    const { target } = await startServer(invoker);
    const client = newClient(target);
    const written = [client.invoke('a', null, soon()), client.invoke('b', null, soon())];
    await invoker.waitUntil(() => invoker.calls.length === 2, 'two calls on the peer');
    const closing = client.close();
    expect(client.close()).toBe(closing);
    expect(await within(Promise.all(written), 'settled')).toEqual([engine('WORKER_DISCONNECTED'), engine('WORKER_DISCONNECTED')]);
    await within(closing, 'close');
    expect(await client.invoke('c', null, soon())).toEqual({ dispatched: false, reason: 'forward client is closed' });

    const fresh = newClient(target);
    const queued = fresh.invoke('d', null, soon()); // still connecting: never written
    await fresh.close();
    expect(await queued).toEqual({ dispatched: false, reason: 'forward client closed' });
    expect(fresh.pendingCount).toBe(0);
  });

  it('sends void calls without waiting for an answer, also before the connection is up', async () => {
    const invoker = new FakeInvoker();
    const { target } = await startServer(invoker);
    const client = newClient(target);
    client.fire('log::event', { n: 1 });
    client.fire('log::event', { n: 2 });
    await invoker.waitUntil(() => invoker.fired.length === 2, 'two fired calls');
    expect(invoker.fired).toEqual([
      { functionId: 'log::event', data: { n: 1 } },
      { functionId: 'log::event', data: { n: 2 } },
    ]);
    expect(invoker.calls).toHaveLength(0);
    expect(client.pendingCount).toBe(0);
  });
});

describe('forward server', () => {
  it.each<[string, (target: ForwardTarget) => Buffer[], string]>([
    ['a wrong secret', () => [hello({ secret: 'guess' })], 'wrong cluster secret'],
    ['a wrong cluster name', () => [hello({ cluster: 'elsewhere' })], 'wrong cluster name'],
    ['an unsupported version', () => [hello({ version: 99 })], 'unsupported protocol version'],
    ['a call before the handshake', () => [call(1)], 'call before the handshake'],
    ['undecodable msgpack', () => [lengthHeader(3), Buffer.from([0xc1, 0xc1, 0xc1])], 'not valid msgpack'],
    ['a frame of the wrong shape', () => [encodeFrame({ hello: true })], 'malformed'],
    ['a huge length before the handshake', () => [lengthHeader(0x7fffffff)], 'exceeds the limit'],
    ['an empty frame', () => [lengthHeader(0)], 'empty body'],
    ['a second hello', () => [hello(), hello()], 'second hello'],
    ['an oversized frame after the handshake', () => [hello(), lengthHeader(4096), Buffer.alloc(16)], 'exceeds the limit of 2048'],
  ])('closes a connection that sends %s, says why, and keeps serving others', async (_name, frames, reason) => {
    const invoker = new FakeInvoker();
    const { target, logs } = await startServer(invoker, 'unix', { maxFrameBytes: 2048 });
    const raw = await rawConnection(target);
    for (const frame of frames(target)) raw.socket.write(frame);
    await within(raw.closed, 'server closing the connection');
    expect(raw.messages.at(-1)).toEqual({ kind: 'reject', reason: expect.stringContaining(reason) });
    await logs.waitFor((e) => e.msg === 'forward connection refused', 'refusal log');
    expect(logs.entries.find((e) => e.msg === 'forward connection refused')).toMatchObject({ level: 40, remote: target.socketPath, reason: expect.stringContaining(reason) });
    expect(invoker.calls).toHaveLength(0);
    expect(await newClient(target).invoke('f', 'still here', soon())).toEqual({ dispatched: true, outcome: { ok: true, value: 'still here' } });
  });

  it('refuses a recorded hello played again on a new connection (the nonce was seen)', async () => {
    const { target } = await startServer(new FakeInvoker(), 'unix');
    const recorded = hello();
    const first = await rawConnection(target);
    first.socket.write(recorded);
    await waitUntil(() => first.messages.length > 0, 5000, 'the first hello answered');
    expect(first.messages[0]).toEqual({ kind: 'helloOk', version: FORWARD_PROTOCOL_VERSION, features: HELLO_FEATURES.binary });
    const replay = await rawConnection(target);
    replay.socket.write(recorded);
    await within(replay.closed, 'server closing the replayed connection');
    expect(replay.messages.at(-1)).toEqual({ kind: 'reject', reason: 'hello replayed' });
    first.socket.destroy();
  });

  it('logs the remote TCP address of a refused connection', async () => {
    const { target, logs } = await startServer(new FakeInvoker(), 'tcp');
    const raw = await rawConnection(target);
    raw.socket.write(hello({ secret: 'guess' }));
    await within(raw.closed, 'close');
    await logs.waitFor((e) => e.msg === 'forward connection refused', 'refusal log');
    expect(logs.entries.find((e) => e.msg === 'forward connection refused')?.remote).toMatch(/^127\.0\.0\.1:\d+$/);
  });

  it('closes a connection that never says hello', async () => {
    const { target } = await startServer(new FakeInvoker(), 'unix', { helloTimeoutMs: 100 });
    const raw = await rawConnection(target);
    await within(raw.closed, 'hello timeout');
    expect(raw.messages).toEqual([{ kind: 'reject', reason: 'no handshake within 100 ms' }]);
  });

  it('refuses to take over a socket path another live server listens on', async () => {
    const { target } = await startServer(new FakeInvoker());
    const second = new ForwardServer({ socketPath: target.socketPath, secret: SECRET, cluster: CLUSTER, invoker: new FakeInvoker(), logger: pino({ level: 'silent' }) });
    cleanups.push(() => second.close());
    await expect(second.start()).rejects.toMatchObject({ code: 'LISTEN_FAILED' });
  });

  it('close() lets calls in progress answer, sends new ones elsewhere, then ends', async () => {
    const gate = deferred<InvocationOutcome>();
    const invoker = new FakeInvoker(() => gate.promise);
    const { server, target } = await startServer(invoker);
    const client = newClient(target);
    const inFlight = client.invoke('slow', null, soon());
    await invoker.waitUntil(() => invoker.calls.length === 1, 'the call on the peer');
    const closing = server.close();
    expect(server.close()).toBe(closing);
    expect(await client.invoke('late', null, soon())).toEqual({ dispatched: false, reason: expect.stringContaining('shutting down') });
    gate.resolve({ ok: true, value: 'done' });
    expect(await within(inFlight, 'drained call')).toEqual({ dispatched: true, outcome: { ok: true, value: 'done' } });
    await within(closing, 'server close');
    expect(invoker.calls).toHaveLength(1);
  });
});
