import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { IpcChannel } from '../../src/bus/ipc-channel.js';
import { memoryLink } from '../support/memory-ipc.js';
import { EmbeddedQueueHost } from '../../src/modules/queue/embedded-queue-host.js';
import { IpcQueueStore } from '../../src/modules/queue/embedded-queue-link.js';
import { StoreBackend } from '../../src/modules/queue/queue-backend.js';
import type { LaneSettings, QueueJob } from '../../src/modules/queue/queue-job.js';
import { waitUntil } from '../support/logs.js';

const logger = pino({ level: 'silent' });

/** Two ends of an in-memory IPC link; a message arrives on a later turn, as over a real one. */
function channelPair(): [IpcChannel, IpcChannel] {
  const link = memoryLink();
  return [link.child, link.primary];
}

// Polls once a minute: in these tests a consumer claims only when it is told to.
const lane: LaneSettings = { lane: 'queue:q', concurrency: 1, fifo: false, maxAttempts: 3, backoffMs: 10, pollIntervalMs: 60_000 };
const job = (id: string): QueueJob => ({ id, lane: lane.lane, functionId: 'f', data: { id }, attemptsMade: 0, maxAttempts: 3, backoffMs: 10, createdAt: Date.now() });

/**
 * The primary's embedded queue host tells the other children when a lane may have work for them
 * (docs/queue.md#embedded): without it, a child that keeps a lane's slots busy re-claims each one it
 * frees before the others poll again, and a worker connected to another child gets nothing.
 */
describe('embedded queue host: other children hear of work', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  const setUp = (): { host: EmbeddedQueueHost; child: () => { store: IpcQueueStore; primaryEnd: IpcChannel } } => {
    const host = new EmbeddedQueueHost(undefined, logger);
    host.start();
    closers.push(() => host.close());
    return {
      host,
      child: () => {
        const [childEnd, primaryEnd] = channelPair();
        host.attach(primaryEnd);
        const store = new IpcQueueStore(childEnd);
        closers.push(() => store.close());
        return { store, primaryEnd };
      },
    };
  };

  it('enqueue, ack and fail on one child tell the others (not the sender) which lane to look at', async () => {
    const { child } = setUp();
    const a = child();
    const b = child();
    const heardA: string[] = [];
    const heardB: string[] = [];
    a.store.onReady((l) => heardA.push(l));
    b.store.onReady((l) => heardB.push(l));
    await a.store.enqueue(job('m1'));
    await a.store.enqueue(job('m2'));
    await waitUntil(() => heardB.length === 2, 5_000, 'B told of two enqueues');
    const [first] = await a.store.claim(lane, 1, 10_000);
    expect(await a.store.ack(lane.lane, first?.id ?? '')).toBe(true);
    await waitUntil(() => heardB.length === 3, 5_000, 'B told of the ack');
    const [second] = await a.store.claim(lane, 1, 10_000);
    expect(await a.store.fail(lane.lane, second?.id ?? '', 'boom')).toBe('retry');
    await waitUntil(() => heardB.length === 4, 5_000, 'B told of the failure');
    expect(heardB).toEqual(['queue:q', 'queue:q', 'queue:q', 'queue:q']);
    await new Promise((r) => setTimeout(r, 50));
    expect(heardA).toEqual([]);
  });

  it('a consumer on another child runs a message at once, not at its next poll', async () => {
    const { child } = setUp();
    const producer = child();
    const consumerChild = child();
    const backend = new StoreBackend(consumerChild.store, logger);
    closers.push(() => backend.close());
    const ran: string[] = [];
    await backend.consume(lane, (j) => {
      ran.push(j.id);
      return Promise.resolve({ ok: true });
    });
    // Let its first claim find nothing and start its minute-long pause.
    await new Promise((r) => setTimeout(r, 100));
    await producer.store.enqueue(job('m1'));
    await waitUntil(() => ran.length === 1, 5_000, 'the other child ran it');
    expect(ran).toEqual(['m1']);
  });

  it('the messages of a child that exits run again on another child at once', async () => {
    const { host, child } = setUp();
    const gone = child();
    const other = child();
    const heard: string[] = [];
    other.store.onReady((l) => heard.push(l));
    await other.store.enqueue(job('m1'));
    expect(await gone.store.claim(lane, 1, 10_000)).toHaveLength(1);
    host.detach(gone.primaryEnd);
    await waitUntil(() => heard.length === 1, 5_000, 'the other child told');
    // The exit counted a failed attempt: the message is back after its (10 ms) backoff.
    let claimed: QueueJob[] = [];
    await waitUntil(async () => (claimed = await other.store.claim(lane, 1, 10_000)).length === 1, 5_000, 'claimed on the other child');
    expect(claimed.map((j) => [j.id, j.attemptsMade])).toEqual([['m1', 1]]);
  });
});
