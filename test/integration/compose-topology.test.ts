// docker-compose.yml's topology, run without Docker (no daemon here): a real nginx with deploy/nginx.conf
// in front of three engines running deploy/switchyard.yaml with the engine service's environment (Redis
// mode, a real redis-server on a free port), two copies of examples/replicated-worker.mjs connected through
// nginx's worker listener, and a real Prometheus with deploy/prometheus/prometheus.yml and alerts.yml.
// Only addresses are adapted: loopback and free ports instead of the compose network's names and fixed
// ports (three engines cannot share one port on one machine), and Prometheus's DNS discovery of the
// `engine` service replaced by the three engines' admin addresses. Everything else is the shipped files.
// test/unit/compose-monitoring.test.ts and test/unit/deploy.test.ts check the files statically.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { http } from '../support/http.js';
import type { NginxHandle } from '../support/nginx.js';
import { startNginx } from '../support/nginx.js';
import type { EngineHandle, ManagedProcess } from '../support/processes.js';
import { ROOT, spawnManaged, startEngine, stopProcess, WORKER_READY_MS } from '../support/processes.js';
import type { PrometheusHandle } from '../support/prometheus.js';
import { startPrometheusWithConfig } from '../support/prometheus.js';
import type { RedisServer } from '../support/redis.js';
import { freePort, startRedisServer } from '../support/redis.js';

const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const compose = parseYaml(read('docker-compose.yml')) as { services: Record<string, { environment?: Record<string, string>; deploy?: { replicas?: number } }> };
const ENGINE_REPLICAS = compose.services.engine?.deploy?.replicas ?? 1;
const WORKER_REPLICAS = compose.services.worker?.deploy?.replicas ?? 1;

/** `text` with `from` replaced by `to`, `times` times exactly: an adaptation that silently missed is an error. */
function replaceExactly(text: string, from: string | RegExp, to: string | ((match: string) => string), times: number, what: string): string {
  const pattern = typeof from === 'string' ? new RegExp(from.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'g') : new RegExp(from.source, from.flags.includes('g') ? from.flags : `${from.flags}g`);
  const found = text.match(pattern)?.length ?? 0;
  if (found !== times) throw new Error(`${what}: expected ${times} match(es) of ${String(from)}, found ${found}`);
  return text.replace(pattern, to as string);
}

/** The engine service's environment as compose would give it, `${NAME:-default}` taking its default. */
function engineEnvironment(redisUrl: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(compose.services.engine?.environment ?? {})) {
    env[key] = String(value).replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1');
  }
  // The compose network's `redis` service is this test's redis-server.
  expect(env.REDIS_URL).toBe('redis://redis:6379');
  env.REDIS_URL = redisUrl;
  return env;
}

/** deploy/switchyard.yaml on loopback: the listeners on 127.0.0.1 (ports chosen by the OS, the admin port by the harness), and the engine advertises 127.0.0.1 to its peers. */
function engineConfig(adminPort: number): string {
  let text = read('deploy/switchyard.yaml');
  text = replaceExactly(text, /^(\s+host: )0\.0\.0\.0$/m, '$1127.0.0.1', 3, 'listener hosts');
  text = replaceExactly(text, /^(\s+port: )3111\b/m, '$10', 1, 'HTTP port');
  text = replaceExactly(text, /^(\s+port: )49134\b/m, '$10', 1, 'worker port');
  text = replaceExactly(text, /^(\s+port: )9464\b/m, `$1${adminPort}`, 1, 'admin port');
  // In a container the engine advertises its own address on the compose network; here, loopback.
  text = replaceExactly(text, /^(\s+)(lease_ms: .*)$/m, '$1$2\n$1advertise_host: 127.0.0.1', 1, 'cluster block');
  return text;
}

/** deploy/nginx.conf with the engine service's replicas as loopback upstreams, loopback listeners, and its files in `dir`. */
function nginxConfig(dir: string, engines: EngineHandle[], httpPort: number, workerPort: number): string {
  let text = read('deploy/nginx.conf');
  // Process-level paths: the test's own directory (startNginx sets the pid file; `user` needs root and a user that Debian does not have).
  text = replaceExactly(text, /^user nginx;$/m, '', 1, 'user');
  text = replaceExactly(text, /^pid .*;$/m, '', 1, 'pid');
  text = replaceExactly(text, /^error_log \S+/m, `error_log ${join(dir, 'error.log')}`, 1, 'error_log');
  text = replaceExactly(text, /access_log \S+ switchyard;/, `access_log ${join(dir, 'access.log')} switchyard;`, 1, 'access_log');
  text = replaceExactly(
    text,
    /^http \{$/m,
    `http {\n    client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fastcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;`,
    1,
    'http block',
  );
  // `server engine:PORT …;` resolves to one address per engine replica: one server line per engine here.
  const replicas = (port: 'http' | 'workers') => (line: string) => engines.map((e) => line.replace(/engine:\d+/, `127.0.0.1:${e.ports[port]}`)).join('\n');
  text = replaceExactly(text, /^\s*server engine:3111 .*;$/m, replicas('http'), 1, 'HTTP upstream');
  text = replaceExactly(text, /^\s*server engine:49134 .*;$/m, replicas('workers'), 1, 'worker upstream');
  text = replaceExactly(text, /listen 3111;/, `listen 127.0.0.1:${httpPort};`, 1, 'HTTP listener');
  text = replaceExactly(text, /listen 49134;/, `listen 127.0.0.1:${workerPort};`, 1, 'worker listener');
  return text;
}

/** deploy/prometheus/prometheus.yml with the engine replicas' admin addresses in place of DNS discovery of `engine`. */
function prometheusConfig(engines: EngineHandle[]): string {
  const config = parseYaml(read('deploy/prometheus/prometheus.yml')) as { scrape_configs: Record<string, unknown>[] };
  const jobs = config.scrape_configs.filter((job) => job.job_name === 'switchyard');
  expect(jobs).toHaveLength(1);
  const job = jobs[0]!;
  expect(job.dns_sd_configs).toEqual([expect.objectContaining({ names: ['engine'], type: 'A', port: 9464 })]);
  delete job.dns_sd_configs;
  job.static_configs = [{ targets: engines.map((e) => `127.0.0.1:${e.ports.admin}`) }];
  return stringifyYaml(config);
}

describe('docker-compose.yml\'s topology without Docker: nginx, 3 Redis-mode engines, redis, 2 workers, Prometheus', () => {
  let redis: RedisServer;
  const engines: EngineHandle[] = [];
  const workers: ManagedProcess[] = [];
  let nginx: NginxHandle;
  let prometheus: PrometheusHandle;
  let lb: string;

  beforeAll(async () => {
    expect(ENGINE_REPLICAS).toBe(3);
    expect(WORKER_REPLICAS).toBe(2);
    redis = await startRedisServer();
    const env = engineEnvironment(redis.url);
    for (let i = 0; i < ENGINE_REPLICAS; i++) {
      engines.push(await startEngine({ yaml: engineConfig, env, logLevel: 'info', readyTimeoutMs: 60_000 }));
    }
    const [httpPort, workerPort] = [await freePort(), await freePort()];
    nginx = startNginx((dir) => nginxConfig(dir, engines, httpPort, workerPort));
    lb = `http://127.0.0.1:${httpPort}`;
    // The worker service: examples/replicated-worker.mjs (the image's CMD) connected through the LB.
    for (let i = 0; i < WORKER_REPLICAS; i++) {
      workers.push(spawnManaged(process.execPath, [join(ROOT, 'examples', 'replicated-worker.mjs')], {
        ...process.env,
        III_URL: `ws://127.0.0.1:${workerPort}`,
        OTEL_ENABLED: 'false',
        REPLICA_NAME: `worker-${i + 1}`,
      }));
    }
    prometheus = await startPrometheusWithConfig(prometheusConfig(engines), { 'alerts.yml': read('deploy/prometheus/alerts.yml') });
  }, 240_000);
  afterAll(async () => {
    await prometheus?.stop();
    for (const worker of workers) await stopProcess(worker, 'SIGTERM', 5000);
    await nginx?.stop();
    for (const engine of engines) await engine.stop();
    await redis?.stop();
  }, 90_000);

  /** nginx's access log lines (deploy/nginx.conf's `switchyard` format). */
  const accessLog = () => readFileSync(join(nginx.dir, 'access.log'), 'utf8').split('\n').filter(Boolean);

  it('serves /replica through nginx from both workers, over every engine, with the request id carried through', async () => {
    const deadline = Date.now() + WORKER_READY_MS;
    const replicas = new Set<string>();
    // Both workers connected (through nginx's worker listener) and known to every engine.
    while (replicas.size < WORKER_REPLICAS) {
      if (Date.now() > deadline) throw new Error(`only ${[...replicas].join(', ') || 'no worker'} answered through nginx; nginx: ${nginx.process.stderr.lines.slice(-5).join('\n')}`);
      const res = await http(`${lb}/replica?n=0`);
      if (res.status === 200) replicas.add(res.json<{ replica: string }>().replica);
      else await new Promise((r) => setTimeout(r, 200));
    }
    const before = accessLog().length;
    const answered = new Set<string>();
    for (let n = 1; n <= 12; n++) {
      const res = await http(`${lb}/replica?n=${n}`, { headers: { 'x-request-id': `compose-${n}` } });
      expect(res.status).toBe(200);
      const body = res.json<{ replica: string; n: string; requestId: string }>();
      expect(body).toMatchObject({ n: String(n), requestId: `compose-${n}` });
      expect(res.headers['x-request-id']).toBe(`compose-${n}`);
      answered.add(body.replica);
    }
    expect([...answered].sort()).toEqual(['worker-1', 'worker-2']);
    // nginx balanced the requests over the three engines (round-robin upstream), and logged each with its id.
    // nginx writes a line once it has sent the response: the client can read it first, so the last
    // lines may come a moment later, and a line of the waiting loop above (n=0, no id) may come after
    // `before` was read (CI saw 13 lines once). Only the twelve requests' own lines count.
    const measured = (): string[] => accessLog().slice(before).filter((l) => /\/replica\?n=\d+/.test(l) && l.includes('rid=compose-'));
    const settle = Date.now() + 5000;
    while (measured().length < 12 && Date.now() < settle) await new Promise((r) => setTimeout(r, 50));
    const lines = measured();
    expect(lines).toHaveLength(12);
    for (let n = 1; n <= 12; n++) expect(lines.some((l) => l.includes(`rid=compose-${n} `))).toBe(true);
    const upstreams = new Set(lines.map((l) => /upstream=(\S+)/.exec(l)?.[1]));
    expect([...upstreams].sort()).toEqual(engines.map((e) => `127.0.0.1:${e.ports.http}`).sort());
  }, 60_000);

  it('Prometheus, on the shipped config, sees all three engines up and both workers, with the shipped rules loaded', async () => {
    type Target = { health: string; scrapeUrl: string; labels: { job: string } };
    const targets = async (): Promise<Target[]> => ((await (await fetch(`${prometheus.url}/api/v1/targets`)).json()) as { data: { activeTargets: Target[] } }).data.activeTargets;
    // The shipped scrape_interval is 15 s: the first scrape of each target comes within one interval.
    const deadline = Date.now() + 60_000;
    while (!(await targets()).every((t) => t.health === 'up') || (await targets()).length !== ENGINE_REPLICAS) {
      if (Date.now() > deadline) throw new Error(`targets not all up: ${JSON.stringify(await targets())}`);
      await new Promise((r) => setTimeout(r, 500));
    }
    const up = await targets();
    expect(up.map((t) => t.scrapeUrl).sort()).toEqual(engines.map((e) => `http://127.0.0.1:${e.ports.admin}/metrics`).sort());
    expect(up.every((t) => t.labels.job === 'switchyard')).toBe(true);
    // Both workers counted by every engine, once a scrape after they connected has come in.
    const counted = async () => (await prometheus.query(`count(switchyard_cluster_workers == ${WORKER_REPLICAS})`)).data?.result[0]?.value[1];
    while ((await counted()) !== String(ENGINE_REPLICAS)) {
      if (Date.now() > deadline + 30_000) throw new Error(`not every engine reported ${WORKER_REPLICAS} workers: ${JSON.stringify((await prometheus.query('switchyard_cluster_workers')).data)}`);
      await new Promise((r) => setTimeout(r, 500));
    }
    const rules = ((await (await fetch(`${prometheus.url}/api/v1/rules`)).json()) as { data: { groups: { rules: { name: string }[] }[] } }).data.groups.flatMap((g) => g.rules);
    expect(rules.map((r) => r.name).sort()).toEqual([...read('deploy/prometheus/alerts.yml').matchAll(/- alert: (\w+)/g)].map((m) => m[1]).sort());
  }, 120_000);
});
