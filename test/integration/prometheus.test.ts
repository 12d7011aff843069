// deploy/prometheus and deploy/grafana-dashboard.json against a real Prometheus (Debian's package;
// scripts/prerequisites.sh installs it) scraping a healthy cluster shaped like docker-compose.yml's:
// three Redis-mode engines (a real redis-server on a free port; the first engine runs two processes, so
// /metrics aggregates over children) and two workers serving the same routes, on engines 1 and 2 —
// engine 3 has no worker of its own and serves every route by forwarding. Every shipped alert rule loads
// and stays silent on that cluster (for several evaluations, every `for:` shortened to 1 s in a copy);
// one worker leaving is not an alert; the last one leaving fires SwitchyardRouteUnserved and
// SwitchyardNoWorkers. Every dashboard query is valid PromQL, and the request rate per route is there.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForEveryProcess } from '../support/http.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { ROOT, startEngine, startWorker, stopAll, WORKER_READY_MS } from '../support/processes.js';
import type { PrometheusHandle } from '../support/prometheus.js';
import { startPrometheus } from '../support/prometheus.js';
import type { RedisServer } from '../support/redis.js';
import { startRedisServer } from '../support/redis.js';

const SHIPPED_ALERTS = readFileSync(join(ROOT, 'deploy', 'prometheus', 'alerts.yml'), 'utf8');
const SHIPPED_RULES = [...SHIPPED_ALERTS.matchAll(/- alert: (\w+)/g)].map((m) => m[1]);
// The shipped rules with every `for:` at 1 s: the same expressions, evaluated every second.
const RULES_DIR = mkdtempSync(join(tmpdir(), 'switchyard-rules-'));
const ALERTS = join(RULES_DIR, 'alerts.yml');
writeFileSync(ALERTS, SHIPPED_ALERTS.replace(/for: \d+[smh]/g, 'for: 1s'));
const dashboard = JSON.parse(readFileSync(join(ROOT, 'deploy', 'grafana-dashboard.json'), 'utf8')) as {
  panels: { title: string; targets: { expr: string }[] }[];
};

/** Polls `predicate` every 250 ms (Prometheus evaluates every second) until it holds or `timeoutMs` passes. */
async function eventually(predicate: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe('Prometheus scraping a 3-engine, 2-worker Redis-mode cluster (deploy/prometheus, deploy/grafana-dashboard.json)', () => {
  let redis: RedisServer;
  const engines: EngineHandle[] = [];
  const workers: WorkerHandle[] = [];
  let prometheus: PrometheusHandle;

  beforeAll(async () => {
    redis = await startRedisServer();
    const name = `prom${Math.random().toString(36).slice(2, 8)}`;
    for (const [i, processes] of [2, 1, 1].entries()) {
      engines.push(await startEngine({
        cluster: { processes, redis_url: redis.url, secret: 'prom-secret', name, node_id: `engine-${i + 1}`, advertise_host: '127.0.0.1', heartbeat_ms: 250, lease_ms: 2000 },
        logLevel: 'info',
        readyTimeoutMs: 30_000,
      }));
    }
    // One worker on engine 1, one on engine 2; engine 3 has none and forwards.
    for (const engine of engines.slice(0, 2)) workers.push(startWorker('http-worker', engine.workerUrl, { WORKER_NAME: `worker-on-${engine.ports.admin}` }));
    for (const engine of engines) await waitForEveryProcess(`${engine.httpUrl}/ready`, engine === engines[0] ? 2 : 1, (s) => s === 200, WORKER_READY_MS);
    prometheus = await startPrometheus(engines.map((e) => `127.0.0.1:${e.ports.admin}`), [ALERTS]);
  }, 180_000);
  afterAll(async () => {
    await prometheus?.stop();
    await stopAll(...workers, ...engines);
    await redis?.stop();
    rmSync(RULES_DIR, { recursive: true, force: true });
  }, 60_000);

  type Alert = { labels: { alertname: string; route?: string }; state: string };
  const alerts = async (): Promise<Alert[]> => ((await (await fetch(`${prometheus.url}/api/v1/alerts`)).json()) as { data: { alerts: Alert[] } }).data.alerts;
  const evaluatedSince = async (since: number): Promise<boolean> => {
    const body = (await (await fetch(`${prometheus.url}/api/v1/rules`)).json()) as { data: { groups: { rules: { lastEvaluation: string; health: string }[] }[] } };
    return body.data.groups.flatMap((g) => g.rules).every((r) => r.health === 'ok' && Date.parse(r.lastEvaluation) > since);
  };
  const value = async (promql: string): Promise<string | undefined> => (await prometheus.query(promql)).data?.result[0]?.value[1];
  /** No alert pending or firing over `ms`, checked every half second; rules evaluated after it began. */
  const silentFor = async (ms: number): Promise<void> => {
    const start = Date.now();
    while (Date.now() < start + ms) {
      expect(await alerts()).toEqual([]);
      await new Promise((r) => setTimeout(r, 500));
    }
    await eventually(() => evaluatedSince(start + ms - 1000), 10_000, 'an evaluation after the quiet period');
    expect(await alerts()).toEqual([]);
  };

  it('loads every shipped alert rule, healthy, and none fires on the healthy cluster', async () => {
    const body = (await (await fetch(`${prometheus.url}/api/v1/rules`)).json()) as { data: { groups: { rules: { name: string; health: string }[] }[] } };
    const rules = body.data.groups.flatMap((g) => g.rules);
    expect(rules.map((r) => r.name).sort()).toEqual([...SHIPPED_RULES].sort());
    expect(rules.length).toBe(8);
    // Every engine scraped, both workers counted cluster-wide by each, and engine 3 with none of its own
    // (what a per-engine worker count would page on).
    await eventually(async () => (await value('count(up{job="switchyard"} == 1)')) === '3', 30_000, 'three engines scraped');
    await eventually(async () => (await value('count(switchyard_cluster_workers == 2)')) === '3', 30_000, 'both workers counted by every engine');
    expect(await value(`switchyard_workers_connected{instance="127.0.0.1:${engines[2]!.ports.admin}"}`)).toBe('0');
    expect(await value('min(switchyard_bus_in_sync)')).toBe('1');
    // Several evaluations with that data: every rule healthy, no alert pending or firing.
    await silentFor(5000);
  }, 120_000);

  it("serves every engine's /metrics as valid exposition text (promtool check metrics), the two-process engine's families once each", async () => {
    const promtool = spawnSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' }).stdout.trim();
    expect(promtool, 'promtool comes with the prometheus package (scripts/prerequisites.sh)').not.toBe('');
    for (const engine of engines) {
      const page = await (await fetch(`http://127.0.0.1:${engine.ports.admin}/metrics`)).text();
      // The primary's own families and its children's aggregated ones share a page (the memory bound is in both).
      expect(page).toMatch(/^switchyard_memory_bound_bytes\{pid="\d+"\} \d+$/m);
      const check = spawnSync(promtool, ['check', 'metrics'], { input: page, encoding: 'utf8' });
      expect({ status: check.status, output: `${check.stdout}${check.stderr}` }).toEqual({ status: 0, output: '' });
    }
  });

  it('answers the request rate per route (through every engine), and every dashboard query', async () => {
    const rate = 'sum by (route) (rate(switchyard_http_requests_total[10s]))';
    await eventually(
      async () => {
        for (const engine of engines) {
          for (let i = 0; i < 3; i++) expect((await http(`${engine.httpUrl}/echo/${i}`, { headers: { connection: 'close' } })).status).toBe(200);
        }
        const result = await prometheus.query(rate);
        return (result.data?.result ?? []).some((r) => r.metric.route === '/echo/:id' && Number(r.value[1]) > 0);
      },
      30_000,
      'a non-zero request rate for /echo/:id',
    );
    for (const panel of dashboard.panels) {
      for (const target of panel.targets) {
        const answer = await prometheus.query(target.expr.replaceAll('$__rate_interval', '10s'));
        expect({ panel: panel.title, status: answer.status, error: answer.error }).toEqual({ panel: panel.title, status: 'success', error: undefined });
      }
    }
  }, 60_000);

  it('one of two workers leaving is not an alert; the last one leaving fires SwitchyardRouteUnserved and SwitchyardNoWorkers', async () => {
    const [first, last] = workers as [WorkerHandle, WorkerHandle];
    await first.stop();
    await eventually(async () => (await value('max(switchyard_cluster_workers)')) === '1' && (await value('min(switchyard_cluster_workers)')) === '1', 30_000, 'one worker left, seen by every engine');
    for (const engine of engines) expect((await http(`${engine.httpUrl}/echo/still`)).status).toBe(200);
    await silentFor(4000);

    await last.stop();
    await eventually(
      async () => {
        const firing = (await alerts()).filter((a) => a.state === 'firing');
        return firing.some((a) => a.labels.alertname === 'SwitchyardNoWorkers') && firing.some((a) => a.labels.alertname === 'SwitchyardRouteUnserved' && a.labels.route === '/echo/:id');
      },
      60_000,
      'the worker alerts to fire',
    );
    // Redis is up the whole time: the bus alert stays silent, and only the worker alerts fire.
    const names = new Set((await alerts()).map((a) => a.labels.alertname));
    expect([...names].sort()).toEqual(['SwitchyardNoWorkers', 'SwitchyardRouteUnserved']);
  }, 150_000);
});
