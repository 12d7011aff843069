/**
 * docs/reliability.md#frozen-or-half-open-worker-heartbeat: a worker whose event loop is busy
 * streaming answers no ping, but its channel sockets move data. The record of that traffic on each
 * process (channel-activity.ts), the question across sibling processes (cluster/channel-liveness.ts),
 * and the heartbeat's decision (WorkerConnection.heartbeat): kept while its calls' channels move
 * data, dropped once they stop, dropped at once when it has no such channels.
 */
import { once } from 'node:events';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type WebSocket from 'ws';
import type { ActivityMark, ChannelLiveness, ChannelSighting } from '../../src/channels/channel-activity.js';
import { ChannelActivity } from '../../src/channels/channel-activity.js';
import { Channel, type WriterInput } from '../../src/channels/channel.js';
import { channelLimits } from '../../src/channels/channel-registry.js';
import { attachWebSocket } from '../../src/channels/ws-end.js';
import { ChannelLivenessHost, ChannelLivenessProbe } from '../../src/cluster/channel-liveness.js';
import type { InvocationOutcome, Invoker } from '../../src/invocation/invoker.js';
import { EngineFunctions } from '../../src/workers/engine-functions.js';
import { WorkerConnection } from '../../src/workers/worker-connection.js';
import { WorkerHub } from '../../src/workers/worker-hub.js';
import { waitUntil } from '../support/logs.js';
import { memoryLink } from '../support/memory-ipc.js';
import { closeWsPairs, wsPair } from '../support/ws-pair.js';

/** A clock the test moves by hand. */
function manualClock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_000;
  return { now: () => t, advance: (ms) => (t += ms) };
}

describe('ChannelActivity', () => {
  it('tells how long ago any of the asked channels moved data, opening included', () => {
    const clock = manualClock();
    const activity = new ChannelActivity(5_000, 100, clock.now);
    const a = activity.track('c-1');
    clock.advance(300);
    expect(activity.lastMovedAgo(['c-1'])).toBe(300);
    a.moved();
    clock.advance(40);
    const b = activity.track('c-2');
    clock.advance(10);
    expect(activity.lastMovedAgo(['c-1'])).toBe(50);
    expect(activity.lastMovedAgo(['c-1', 'c-2'])).toBe(10);
    expect(activity.lastMovedAgo(['c-9'])).toBeUndefined();
    expect(activity.lastMovedAgo([])).toBeUndefined();
    b.closed();
    a.closed();
  });

  it('remembers a closed channel for the retention only, and at most maxClosed of them', () => {
    const clock = manualClock();
    const activity = new ChannelActivity(1_000, 2, clock.now);
    const mark = activity.track('c-1');
    mark.moved();
    mark.closed();
    mark.closed(); // idempotent
    clock.advance(1_000);
    expect(activity.lastMovedAgo(['c-1'])).toBe(1_000);
    clock.advance(1);
    expect(activity.lastMovedAgo(['c-1'])).toBeUndefined();
    expect(activity.size).toBe(0);
    for (const id of ['a', 'b', 'c']) activity.track(id).closed();
    expect(activity.size).toBe(2);
    expect(activity.lastMovedAgo(['a'])).toBeUndefined();
    expect(activity.lastMovedAgo(['c'])).toBe(0);
  });

  it('keeps a channel open while either of its sockets here is, and revives a closed one', () => {
    const clock = manualClock();
    const activity = new ChannelActivity(1_000, 10, clock.now);
    const reader = activity.track('c-1');
    const writer = activity.track('c-1');
    reader.closed();
    clock.advance(5_000);
    writer.moved();
    expect(activity.lastMovedAgo(['c-1'])).toBe(0);
    writer.closed();
    clock.advance(5_000);
    expect(activity.lastMovedAgo(['c-1'])).toBeUndefined();
    activity.track('c-1');
    expect(activity.lastMovedAgo(['c-1'])).toBe(0);
  });
});

describe('a worker\'s channel socket reports its traffic', () => {
  afterEach(closeWsPairs);

  function countingMark(): ActivityMark & { moves: number; closes: number } {
    const mark = {
      moves: 0,
      closes: 0,
      moved: () => void mark.moves++,
      closed: () => void mark.closes++,
    };
    return mark;
  }

  /** Both frames arrived, each counted once; the worker's close is reported once. */
  async function twoFramesThenClose(got: string[], mark: { moves: number; closes: number }, worker: WebSocket, engine: WebSocket): Promise<void> {
    await waitUntil(() => got.length === 2, 5000, 'two frames through');
    expect(mark.moves).toBe(2);
    worker.close(1000);
    await once(engine, 'close');
    expect(mark.closes).toBe(1);
  }

  it('counts each frame a writing worker sends, and its close', async () => {
    const { engine, raw, client: worker } = await wsPair();
    const channel = new Channel('c-1', 'k', channelLimits(), () => undefined);
    const mark = countingMark();
    expect(attachWebSocket(engine, raw, channel, 'write', mark)).toBe(true);
    const got: string[] = [];
    channel.attachReader({ write: (data, _binary, flushed) => (got.push(data.toString()), flushed(), true), end: () => undefined });
    worker.send('one');
    worker.send(Buffer.from('two'));
    await twoFramesThenClose(got, mark, worker, engine);
  });

  it('counts each frame handed to a reading worker, and its close', async () => {
    const { engine, raw, client: worker } = await wsPair();
    const channel = new Channel('c-2', 'k', channelLimits(), () => undefined);
    const input = channel.attachWriter({ pause: () => undefined, resume: () => undefined, abort: () => undefined }) as WriterInput;
    const mark = countingMark();
    expect(attachWebSocket(engine, raw, channel, 'read', mark)).toBe(true);
    const got: string[] = [];
    worker.on('message', (data: Buffer) => got.push(data.toString()));
    input.push(Buffer.from('a'), true);
    input.push(Buffer.from('b'), true);
    await twoFramesThenClose(got, mark, worker, engine);
  });

  it('reports a socket that could not join its channel as closed at once', async () => {
    const { engine, raw } = await wsPair();
    const channel = new Channel('c-3', 'k', channelLimits(), () => undefined);
    channel.attachWriter({ pause: () => undefined, resume: () => undefined, abort: () => undefined });
    const mark = countingMark();
    expect(attachWebSocket(engine, raw, channel, 'write', mark)).toBe(false);
    expect([mark.moves, mark.closes]).toEqual([0, 1]);
  });
});

describe('ChannelLivenessProbe across sibling processes (through the primary)', () => {
  /** Three children of one primary, each with its own record. */
  function node(): { activities: ChannelActivity[]; probes: ChannelLivenessProbe[]; clock: ReturnType<typeof manualClock>; severB: () => void } {
    const clock = manualClock();
    const host = new ChannelLivenessHost();
    const links = [memoryLink(), memoryLink(), memoryLink()];
    const activities = links.map(() => new ChannelActivity(10_000, 100, clock.now));
    const probes = links.map((link, i) => {
      host.attach(link.primary);
      return new ChannelLivenessProbe(activities[i] as ChannelActivity, link.child);
    });
    return { activities, probes, clock, severB: () => links[1]?.sever() };
  }

  it('finds data a sibling saw, and the most recent of several', async () => {
    const { activities, probes, clock } = node();
    const [a, b, c] = activities as [ChannelActivity, ChannelActivity, ChannelActivity];
    const [probeA] = probes as [ChannelLivenessProbe];
    b.track('x-1');
    clock.advance(700);
    c.track('x-2');
    clock.advance(100);
    expect(await probeA.lastMoved(['x-1'], 500)).toEqual({ agoMs: 800, where: 'sibling' });
    expect(await probeA.lastMoved(['x-1', 'x-2'], 500)).toEqual({ agoMs: 100, where: 'sibling' });
    expect(await probeA.lastMoved(['x-3'], 500)).toBeUndefined();
    // Its own record is asked first; recent enough, nobody else is asked.
    a.track('x-1');
    expect(await probeA.lastMoved(['x-1'], 500)).toEqual({ agoMs: 0, where: 'here' });
    for (const probe of probes) probe.close();
  });

  it('takes its own older sighting when the siblings saw nothing more recent', async () => {
    const { activities, probes, clock } = node();
    activities[0]?.track('x-1');
    clock.advance(900);
    expect(await probes[0]?.lastMoved(['x-1'], 500)).toEqual({ agoMs: 900, where: 'here' });
    for (const probe of probes) probe.close();
  });

  it('counts a sibling that cannot answer as one that saw nothing', async () => {
    const { activities, probes, severB } = node();
    activities[1]?.track('x-1');
    severB();
    expect(await probes[0]?.lastMoved(['x-1'], 500)).toBeUndefined();
    for (const probe of probes) probe.close();
  });

  it('answers from its own record only without a primary (a single-process engine)', async () => {
    const activity = new ChannelActivity(10_000);
    const probe = new ChannelLivenessProbe(activity);
    expect(await probe.lastMoved(['x-1'], 500)).toBeUndefined();
    activity.track('x-1');
    expect((await probe.lastMoved(['x-1'], 500))?.where).toBe('here');
    probe.close();
  });
});

/** A liveness the test answers by hand: each question waits for `answer`. */
function manualLiveness(): ChannelLiveness & { asked: { ids: readonly string[]; withinMs: number }[]; answer: (seen: ChannelSighting | undefined) => Promise<void> } {
  let pending: ((seen: ChannelSighting | undefined) => void) | undefined;
  const asked: { ids: readonly string[]; withinMs: number }[] = [];
  return {
    asked,
    lastMoved: (ids, withinMs) => {
      asked.push({ ids, withinMs });
      return new Promise((resolve) => (pending = resolve));
    },
    answer: async (seen) => {
      const settle = pending;
      pending = undefined;
      settle?.(seen);
      // Let the connection act on the answer.
      await new Promise((resolve) => setImmediate(resolve));
    },
  };
}

describe('WorkerConnection heartbeat with channel traffic', () => {
  afterEach(closeWsPairs);

  /** A started connection whose client never answers pings (a worker whose event loop is busy). */
  async function silentWorker(liveness: ChannelLiveness): Promise<{ connection: WorkerConnection; frozen: () => number; client: WebSocket }> {
    const { engine: ws, client } = await wsPair({ autoPong: false });
    let frozen = 0;
    const deps = {
      hub: new WorkerHub<WorkerConnection>('p1'),
      invoker: {} as Invoker,
      logger: pino({ level: 'silent' }),
      ignoreTrailingSlash: false,
      workerCallTimeoutMs: 60_000,
      engineFunctions: new EngineFunctions(),
      channelLiveness: liveness,
      onFrozen: () => frozen++,
    };
    const connection = new WorkerConnection(ws, deps, '127.0.0.1');
    connection.start();
    return { connection, frozen: () => frozen, client };
  }

  const MAX_SILENT_TICKS = 3;
  const INTERVAL_MS = 100;
  const ticks = (connection: WorkerConnection, n: number): void => {
    for (let i = 0; i < n; i++) connection.heartbeat(MAX_SILENT_TICKS, INTERVAL_MS);
  };

  it('keeps a silent worker while its call\'s channels move data, and drops it once they stop', async () => {
    const liveness = manualLiveness();
    const { connection, frozen } = await silentWorker(liveness);
    const call = connection.invoke('api::stream', {}, 60_000, { channels: ['t-1', 't-2'] });
    ticks(connection, MAX_SILENT_TICKS + 1);
    expect(liveness.asked).toEqual([{ ids: ['t-1', 't-2'], withinMs: 300 }]);
    // Asked once: further ticks while the question is out ask nothing and drop nothing.
    ticks(connection, 2);
    expect(liveness.asked).toHaveLength(1);
    await liveness.answer({ agoMs: 20, where: 'sibling' });
    expect(connection.closed).toBe(false);
    // Its silence counts from the channel's data: a full timeout passes before the next question.
    ticks(connection, MAX_SILENT_TICKS);
    expect(liveness.asked).toHaveLength(1);
    ticks(connection, 1);
    expect(liveness.asked).toHaveLength(2);
    // The channels stopped too (last data longer ago than the timeout): dropped, its call failed.
    await liveness.answer({ agoMs: 350, where: 'here' });
    expect(connection.closed).toBe(true);
    expect(frozen()).toBe(1);
    const outcome: InvocationOutcome = await call;
    expect(outcome).toMatchObject({ ok: false, failure: { code: 'WORKER_DISCONNECTED' } });
  });

  it('drops a silent worker whose channels saw nothing, or when the question fails', async () => {
    const liveness = manualLiveness();
    const first = await silentWorker(liveness);
    void first.connection.invoke('api::stream', {}, 60_000, { channels: ['t-1'] });
    ticks(first.connection, MAX_SILENT_TICKS + 1);
    await liveness.answer(undefined);
    expect([first.connection.closed, first.frozen()]).toEqual([true, 1]);

    const failing = await silentWorker({ lastMoved: () => Promise.reject(new Error('primary gone')) });
    void failing.connection.invoke('api::stream', {}, 60_000, { channels: ['t-1'] });
    ticks(failing.connection, MAX_SILENT_TICKS + 1);
    await new Promise((resolve) => setImmediate(resolve));
    expect([failing.connection.closed, failing.frozen()]).toEqual([true, 1]);
  });

  it('drops a silent worker at once when no call in flight carries a channel (nothing is asked)', async () => {
    const liveness = manualLiveness();
    const { connection, frozen } = await silentWorker(liveness);
    void connection.invoke('api::plain', {}, 60_000);
    ticks(connection, MAX_SILENT_TICKS);
    expect(connection.closed).toBe(false);
    ticks(connection, 1);
    expect([connection.closed, frozen(), liveness.asked.length]).toEqual([true, 1, 0]);
  });

  it('ignores the answer when the worker spoke while the question was out', async () => {
    const liveness = manualLiveness();
    const { connection, client } = await silentWorker(liveness);
    void connection.invoke('api::stream', {}, 60_000, { channels: ['t-1'] });
    ticks(connection, MAX_SILENT_TICKS + 1);
    const answered = new Promise<void>((resolve) =>
      client.on('message', (data: Buffer) => {
        if ((JSON.parse(data.toString()) as { type: string }).type === 'pong') resolve();
      }),
    );
    client.send(JSON.stringify({ type: 'ping' }));
    await answered;
    await liveness.answer(undefined);
    expect(connection.closed).toBe(false);
  });
});
