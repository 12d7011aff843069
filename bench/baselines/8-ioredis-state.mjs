// Baseline (8): what state::set / state::get cost an app that talks to Redis itself — a bare ioredis
// client against REDIS_URL doing SET then GET of the same JSON values on the same 100 keys, COUNT
// each with IN_FLIGHT outstanding. Prints one JSON line per op: {op, count, seconds, perSecond, p50Ms, p99Ms}.
import { Redis } from 'ioredis';
import { benchValue as value, measureOps } from './measure-ops.mjs';

const count = Number(process.env.COUNT);
const inFlight = Number(process.env.IN_FLIGHT ?? 64);
const redis = new Redis(process.env.REDIS_URL);

const measure = (op, call) => measureOps(op, count, inFlight, call);

const key = (i) => `bench-bare-${process.pid}:bench:k${i % 100}`;
await redis.set(key(0), JSON.stringify(value(0)));
await measure('set', (i) => redis.set(key(i), JSON.stringify(value(i))));
await measure('get', async (i) => JSON.parse(await redis.get(key(i))));
redis.disconnect();
