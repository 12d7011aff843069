// Baseline (7): a bare BullMQ producer/consumer pair in one process against REDIS_URL — what an app
// would write without Switchyard. Enqueues COUNT jobs with IN_FLIGHT adds outstanding; a Worker with
// CONCURRENCY runs each (it does nothing but note the time). Prints one JSON line:
// {count, seconds, perSecond, p50Ms, p99Ms}, latency = run start − add start (wall clock, one host),
// measured by the loop the queue-bench worker uses too (measure-ops.mjs, enqueueToRun).
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { enqueueToRun } from './measure-ops.mjs';

const count = Number(process.env.COUNT);
const inFlight = Number(process.env.IN_FLIGHT ?? 64);
const concurrency = Number(process.env.CONCURRENCY ?? 16);
const connection = new Redis(process.env.REDIS_URL, { maxRetriesPerRequest: null });
const name = `bare-${process.pid}-${Date.now()}`;
const queue = new Queue(name, { connection, prefix: 'bench-bare' });
const run = enqueueToRun(count);
const worker = new Worker(
  name,
  async (job) => {
    run.ran(job.data);
  },
  { connection, prefix: 'bench-bare', concurrency },
);
await worker.waitUntilReady();
await run.measure(inFlight, (payload) => queue.add('m', payload, { attempts: 3, backoff: { type: 'exponential', delay: 1000 }, removeOnComplete: true, removeOnFail: false }));
await worker.close();
await queue.obliterate({ force: true });
await queue.close();
connection.disconnect();
