import { spawnManaged, startEngine } from '../../test/support/processes.js';
import { startRedisServer } from '../../test/support/redis.js';

type Engine = Awaited<ReturnType<typeof startEngine>>;
type Redis = Awaited<ReturnType<typeof startRedisServer>>;
type ModuleEntry = { name: string; config?: Record<string, unknown> };

/**
 * A redis-server started here and one Switchyard process in Redis mode on it, with `modules`, for the
 * module rows (queue, state) that measure the engine against a bare client of the same Redis. Both
 * are stopped when `body` settles.
 */
export async function withRedisModeEngine<T>(name: string, modules: ModuleEntry[], body: (redis: Redis, engine: Engine) => Promise<T>): Promise<T> {
  const redis = await startRedisServer();
  try {
    const engine = await startEngine({
      logLevel: 'warn',
      cluster: { processes: 1, redis_url: redis.url, secret: 'bench-secret', name, advertise_host: '127.0.0.1' },
      modules,
    });
    try {
      return await body(redis, engine);
    } finally {
      await engine.stop();
    }
  } finally {
    await redis.stop();
  }
}

/**
 * Runs a bench script (a baseline or a bench worker) to its end, at most five minutes, and returns
 * the JSON lines of its stdout that start with `prefix`; throws with its last stderr lines when it
 * fails or prints another number of them than `expected`.
 */
export async function scriptResults<T>(script: string, env: NodeJS.ProcessEnv, prefix: string, expected: number): Promise<T[]> {
  const p = spawnManaged(process.execPath, [script], { ...process.env, ...env });
  const timer = setTimeout(() => p.child.kill('SIGKILL'), 300_000);
  const exit = await p.exited;
  clearTimeout(timer);
  const lines = p.stdout.lines.filter((l) => l.startsWith(prefix));
  if (exit.code !== 0 || lines.length !== expected) throw new Error(`${script} failed (${JSON.stringify(exit)}): ${p.stderr.lines.slice(-5).join('\n')}`);
  return lines.map((l) => JSON.parse(l) as T);
}
