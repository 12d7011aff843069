// Baseline (7): a bare BullMQ producer/consumer pair in one process against REDIS_URL — what an app
// would write without Switchyard. Enqueues COUNT jobs with IN_FLIGHT adds outstanding; a Worker with
// CONCURRENCY runs each (it does nothing but note the time). Prints one JSON line:
// {count, seconds, perSecond, p50Ms, p99Ms}, latency = run start − add start (wall clock, one host).
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';

const count = Number(process.env.COUNT);
const inFlight = Number(process.env.IN_FLIGHT ?? 64);
const concurrency = Number(process.env.CONCURRENCY ?? 16);
const connection = new Redis(process.env.REDIS_URL, { maxRetriesPerRequest: null });
const name = `bare-${process.pid}-${Date.now()}`;
const queue = new Queue(name, { connection, prefix: 'bench-bare' });
const latencies = [];
let done;
const finished = new Promise((resolve) => (done = resolve));
const worker = new Worker(
  name,
  async (job) => {
    latencies.push(Date.now() - job.data.t);
    if (latencies.length === count) done();
  },
  { connection, prefix: 'bench-bare', concurrency },
);
await worker.waitUntilReady();
const started = Date.now();
let next = 0;
await Promise.all(
  Array.from({ length: inFlight }, async () => {
    while (next < count) {
      next++;
      await queue.add('m', { t: Date.now() }, { attempts: 3, backoff: { type: 'exponential', delay: 1000 }, removeOnComplete: true, removeOnFail: false });
    }
  }),
);
await finished;
const seconds = (Date.now() - started) / 1000;
latencies.sort((a, b) => a - b);
const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
console.log(JSON.stringify({ count, seconds, perSecond: count / seconds, p50Ms: at(0.5), p99Ms: at(0.99) }));
await worker.close();
await queue.obliterate({ force: true });
await queue.close();
connection.disconnect();
