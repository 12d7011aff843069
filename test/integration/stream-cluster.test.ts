import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForStatus } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { WORKER_READY_MS, startEngine, startWorker, stopAll } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';
import { freePort } from '../support/redis.js';
import type { StreamFrame } from '../support/stream-client.js';
import { RawStreamClient } from '../support/stream-client.js';

/**
 * iii-stream on two processes of one node (embedded: the primary holds the items). Real iii-sdk
 * workers (test/fixtures/workers/stream-app-worker.mjs, shaped like iii's example app) and raw
 * stream clients; the clients land on both processes (checked from the engine's log).
 */
describe('iii-stream on two processes (embedded)', () => {
  let engine: EngineHandle;
  let streamUrl: string;
  const workers: WorkerHandle[] = [];
  const clients: RawStreamClient[] = [];

  const connect = async (query = ''): Promise<RawStreamClient> => {
    const client = await RawStreamClient.connect(`${streamUrl}/${query}`);
    clients.push(client);
    return client;
  };
  const audit = async (kind: string): Promise<Record<string, unknown>[]> => {
    const worker = await RawWorker.connect(engine.workerUrl);
    try {
      worker.send({ type: 'invokefunction', invocation_id: 'a1', function_id: 'stream::list', data: { stream_name: 'audit', group_id: kind } });
      return ((await worker.ofType('invocationresult')).result ?? []) as Record<string, unknown>[];
    } finally {
      await worker.close();
    }
  };

  beforeAll(async () => {
    const port = await freePort();
    streamUrl = `ws://127.0.0.1:${port}`;
    engine = await startEngine({
      cluster: { processes: 2 },
      readyTimeoutMs: 60_000,
      modules: [{ name: 'iii-stream', config: { host: '127.0.0.1', port, auth_function: 'todo::auth' } }],
    });
    workers.push(startWorker('stream-app-worker', engine.workerUrl, { WORKER_NAME: 'app-a', CUSTOM_STREAM: '1' }));
    await waitForStatus(`${engine.httpUrl}/todo-ready`, (s) => s === 200, {}, WORKER_READY_MS);
    workers.push(startWorker('stream-app-worker', engine.workerUrl, { WORKER_NAME: 'app-b' }));
    await waitUntil(async () => (await http(`${engine.adminUrl}/readyz`)).text.includes('"connectedWorkers":2'), WORKER_READY_MS, 'both workers');
  }, 180_000);
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await stopAll(...workers, engine);
  }, 60_000);

  it('a change made through any process reaches clients on both processes, in the order written', async () => {
    const group = await Promise.all(Array.from({ length: 4 }, () => connect()));
    group.forEach((c, i) => c.join(`all-${i}`, 'todo', 'inbox'));
    await Promise.all(group.map((c) => c.synced('inbox')));
    const pids = new Set(engine.stdout.lines.filter((l) => l.includes('stream client connected')).map((l) => (JSON.parse(l) as { pid: number }).pid));
    expect(pids.size).toBe(2);

    const ids = ['o-1', 'o-2', 'o-3'];
    for (const id of ids) expect((await http(`${engine.httpUrl}/todo`, { method: 'POST', body: JSON.stringify({ id, description: id }), headers: { 'content-type': 'application/json' } })).status).toBe(201);
    expect((await http(`${engine.httpUrl}/todo/o-2/complete`, { method: 'POST' })).status).toBe(200);
    expect((await http(`${engine.httpUrl}/todo/o-1`, { method: 'DELETE' })).status).toBe(200);
    for (const c of group) {
      await c.next((f) => f.id === 'o-1' && f.event.type === 'delete', 15_000, 'delete of o-1');
      await c.next((f) => f.id === 'o-2' && f.event.type === 'update', 15_000, 'update of o-2');
      const seen = c.frames.filter((f) => f.event.type !== 'sync').map((f) => `${f.id}:${f.event.type}`);
      expect(seen).toEqual(['o-1:create', 'o-2:create', 'o-3:create', 'o-2:update', 'o-1:delete']);
      const update = c.frames.find((f) => f.id === 'o-2' && f.event.type === 'update') as StreamFrame;
      expect(update).toMatchObject({ type: 'stream', streamName: 'todo', groupId: 'inbox', event: { data: { id: 'o-2', description: 'o-2' } } });
      expect((update.event.data as { completedAt: unknown }).completedAt).toEqual(expect.any(String));
    }
    // Reads agree on every process.
    for (let i = 0; i < 4; i++) {
      const list = (await http(`${engine.httpUrl}/todo`)).json<{ id: string }[]>();
      expect(list.map((t) => t.id).sort()).toEqual(['o-2', 'o-3']);
    }
    expect((await http(`${engine.httpUrl}/todo-groups`)).json()).toEqual(['inbox']);
  }, 90_000);

  it('an item subscription hears only its item; stream::send reaches the group', async () => {
    const c = await connect();
    await http(`${engine.httpUrl}/todo`, { method: 'POST', body: JSON.stringify({ id: 'i-1', description: 'first' }), headers: { 'content-type': 'application/json' } });
    c.join('one', 'todo', 'inbox', 'i-1');
    expect(await c.synced('inbox')).toMatchObject({ id: 'i-1', description: 'first' });
    await http(`${engine.httpUrl}/todo`, { method: 'POST', body: JSON.stringify({ id: 'i-2' }), headers: { 'content-type': 'application/json' } });
    await http(`${engine.httpUrl}/todo-ping`, { method: 'POST', body: JSON.stringify({ hello: 1 }), headers: { 'content-type': 'application/json' } });
    await http(`${engine.httpUrl}/todo/i-1/complete`, { method: 'POST' });
    await c.next((f) => f.id === 'i-1' && f.event.type === 'update');
    expect(c.frames.some((f) => f.id === 'i-2')).toBe(false);
  }, 90_000);

  it('runs auth, join and leave handlers; a join handler refuses; stream triggers fire once per change per trigger', async () => {
    const c = await connect('?user=ann');
    c.join('no', 'todo', 'forbidden');
    expect(await c.next((f) => f.groupId === 'forbidden')).toMatchObject({ event: { type: 'unauthorized' } });
    c.join('yes', 'todo', 'inbox');
    await c.synced('inbox');
    // Two workers each registered a join handler: both ran, with the auth function's context.
    await waitUntil(async () => (await audit('joins')).filter((j) => j.subscription_id === 'yes').length === 2, 15_000, 'join handlers');
    expect((await audit('joins')).find((j) => j.subscription_id === 'yes')).toMatchObject({ group: 'inbox', context: { user: 'ann', path: '/' } });
    await c.close();
    await waitUntil(async () => (await audit('leaves')).filter((j) => j.subscription_id === 'yes').length === 2, 15_000, 'leave handlers');

    await http(`${engine.httpUrl}/todo`, { method: 'POST', body: JSON.stringify({ id: 'trig-1' }), headers: { 'content-type': 'application/json' } });
    await waitUntil(async () => (await audit('changes')).filter((e) => e.id === 'trig-1').length >= 2, 15_000, 'stream triggers');
    // A later change's triggers have run too: no third run of the first change's is on its way.
    await http(`${engine.httpUrl}/todo`, { method: 'POST', body: JSON.stringify({ id: 'trig-2' }), headers: { 'content-type': 'application/json' } });
    await waitUntil(async () => (await audit('changes')).filter((e) => e.id === 'trig-2').length >= 2, 15_000, 'stream triggers');
    expect((await audit('changes')).filter((e) => e.id === 'trig-1').map((e) => e.type)).toEqual(['create', 'create']);
  }, 90_000);

  it('serves a custom stream (createStream) from its worker, whichever process is asked, and its changes reach clients', async () => {
    const c = await connect();
    c.join('memo', 'memo', 'g');
    expect(await c.synced('g')).toEqual([]);
    for (let attempt = 0; attempt < 4; attempt++) {
      const caller = await RawWorker.connect(engine.workerUrl);
      try {
        caller.send({ type: 'invokefunction', invocation_id: 's', function_id: 'stream::set', data: { stream_name: 'memo', group_id: 'g', item_id: `m${attempt}`, data: { n: attempt } } });
        expect((await caller.ofType('invocationresult')).result).toEqual({ old_value: null, new_value: { n: attempt } });
        caller.send({ type: 'invokefunction', invocation_id: 'g', function_id: 'stream::get', data: { stream_name: 'memo', group_id: 'g', item_id: `m${attempt}` } });
        expect((await caller.ofType('invocationresult')).result).toEqual({ n: attempt });
      } finally {
        await caller.close();
      }
    }
    await c.next((f) => f.id === 'm3' && f.event.type === 'create');
    expect(c.frames.filter((f) => f.event.type === 'create').map((f) => f.id)).toEqual(['m0', 'm1', 'm2', 'm3']);
  }, 90_000);

  it('exposes the stream metrics on /metrics', async () => {
    const metrics = (await http(`${engine.adminUrl}/metrics`)).text;
    expect(metrics).toMatch(/switchyard_stream_clients \d+/);
    expect(metrics).toMatch(/switchyard_stream_calls_total\{function="stream::set",outcome="ok"\} \d+/);
    expect(metrics).toMatch(/switchyard_stream_frames_delivered_total \d+/);
  }, 90_000);
});
