// The embedded queue across two engine processes (docs/queue.md#embedded): the primary holds the one
// copy of every queue and both children consume it, each running messages on the worker connected to
// it. With a consumer worker on each process: a standard queue never runs more than its
// `concurrency` messages at once in the whole engine, a FIFO queue never more than `concurrency`
// groups, a group never two of its messages at once nor out of order, and both processes' consumers
// get work. Real iii-sdk 0.22.1 clients in this process, so every run is seen on one clock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';

process.env.OTEL_ENABLED = 'false';
const { registerWorker, TriggerAction } = await import('iii-sdk');
type Client = ReturnType<typeof registerWorker>;

const STANDARD_CONCURRENCY = 3;
const FIFO_CONCURRENCY = 2;
const STANDARD_JOBS = 60;
const GROUPS = 5;
const PER_GROUP = 12;

interface Payload {
  n: number;
  g?: string;
  seq?: number;
}

/** The peer (engine process) a named worker is connected to, from the admin view. */
async function peerOf(engine: EngineHandle, name: string): Promise<string | undefined> {
  const res = await http(`${engine.adminUrl}/workers`);
  if (res.status !== 200) return undefined;
  return res.json<{ name?: string; peer: string }[]>().find((w) => w.name === name)?.peer;
}

describe('embedded queue on two engine processes, a consumer on each', () => {
  let engine: EngineHandle;
  const clients: Client[] = [];
  const consumers: { name: string; client: Client; peer: string }[] = [];

  // What the consumers saw, on this process's one clock.
  let standardRunning = 0;
  let standardMax = 0;
  let fifoRunning = 0;
  let fifoMax = 0;
  const groupRunning = new Set<string>();
  const lastSeq = new Map<string, number>();
  const violations: string[] = [];
  const ranBy = new Map<string, number>();
  let standardDone = 0;
  let fifoDone = 0;

  const pause = (): Promise<void> => new Promise((r) => setTimeout(r, 15 + Math.random() * 25));

  const serve = (name: string, client: Client): void => {
    client.registerFunction('qc::standard', async () => {
      standardRunning++;
      standardMax = Math.max(standardMax, standardRunning);
      ranBy.set(name, (ranBy.get(name) ?? 0) + 1);
      await pause();
      standardRunning--;
      standardDone++;
      return {};
    });
    client.registerFunction('qc::ordered', async (p: Payload) => {
      const group = p.g ?? '';
      if (groupRunning.has(group)) violations.push(`${group}: seq ${p.seq} started while another of the group ran`);
      if (p.seq !== (lastSeq.get(group) ?? -1) + 1) violations.push(`${group}: seq ${p.seq} after ${lastSeq.get(group)}`);
      groupRunning.add(group);
      lastSeq.set(group, p.seq ?? -1);
      fifoRunning++;
      fifoMax = Math.max(fifoMax, fifoRunning);
      ranBy.set(name, (ranBy.get(name) ?? 0) + 1);
      await pause();
      fifoRunning--;
      groupRunning.delete(group);
      fifoDone++;
      return {};
    });
  };

  beforeAll(async () => {
    engine = await startEngine({
      cluster: { processes: 2 },
      logLevel: 'warn',
      modules: [
        {
          name: 'iii-queue',
          config: {
            queue_configs: {
              standard: { concurrency: STANDARD_CONCURRENCY },
              ordered: { type: 'fifo', message_group_field: 'g', concurrency: FIFO_CONCURRENCY },
            },
            adapter: { name: 'builtin' },
          },
        },
      ],
    });
    // node:cluster hands connections to the children in turn: connect until one consumer is on each.
    for (let attempt = 0; consumers.length < 2; attempt++) {
      if (attempt === 8) throw new Error('every worker landed on the same process');
      const name = `consumer-${attempt}`;
      const client = registerWorker(engine.workerUrl, { workerName: name, reconnectionConfig: { maxRetries: 3, initialDelayMs: 100, maxDelayMs: 1000 } });
      clients.push(client);
      let peer: string | undefined;
      await waitUntil(async () => (peer = await peerOf(engine, name)) !== undefined, 10_000, `${name} connected`);
      if (consumers.some((c) => c.peer === peer)) continue;
      serve(name, client);
      consumers.push({ name, client, peer: peer as string });
    }
    // Both consumers' functions are in every process's table before anything is enqueued.
    await waitUntil(async () => {
      const res = await http(`${engine.adminUrl}/workers`);
      const listed = res.json<{ name?: string; functions?: unknown[] }[]>();
      return consumers.every((c) => (listed.find((w) => w.name === c.name)?.functions?.length ?? 0) >= 2);
    }, 10_000, 'both consumers registered');
  }, 60_000);

  afterAll(async () => {
    for (const client of clients) await client.shutdown().catch(() => undefined);
    await engine?.stop();
  });

  it('holds concurrency and FIFO order across both processes, and both consumers get work', async () => {
    const [a, b] = consumers.map((c) => c.client) as [Client, Client];
    const enqueue = (client: Client, functionId: string, queue: string, payload: Payload): Promise<unknown> =>
      client.trigger({ function_id: functionId, payload, action: TriggerAction.Enqueue({ queue }) });
    // Standard jobs from both processes at once; each FIFO group from one process, in order.
    const standard = Array.from({ length: STANDARD_JOBS }, (_, n) => enqueue(n % 2 === 0 ? a : b, 'qc::standard', 'standard', { n }));
    const fifo = Array.from({ length: GROUPS }, async (_, g) => {
      for (let seq = 0; seq < PER_GROUP; seq++) await enqueue(g % 2 === 0 ? a : b, 'qc::ordered', 'ordered', { n: seq, g: `g${g}`, seq });
    });
    await Promise.all([...standard, ...fifo]);
    await waitUntil(() => standardDone === STANDARD_JOBS && fifoDone === GROUPS * PER_GROUP, 60_000, 'every message ran');

    expect(violations).toEqual([]);
    expect([...lastSeq.values()]).toEqual(Array.from({ length: GROUPS }, () => PER_GROUP - 1));
    expect(standardMax).toBeLessThanOrEqual(STANDARD_CONCURRENCY);
    expect(fifoMax).toBeLessThanOrEqual(FIFO_CONCURRENCY);
    // The runs did overlap (the limits were tested), and each process's consumer ran some.
    expect(standardMax).toBeGreaterThan(1);
    console.log(`runs per consumer: ${JSON.stringify(Object.fromEntries(ranBy))}, most at once: standard ${standardMax}, fifo ${fifoMax}`);
    for (const c of consumers) expect(ranBy.get(c.name) ?? 0).toBeGreaterThan(0);
  }, 90_000);
});
