// deploy/prometheus and deploy/grafana-dashboard.json against a real Prometheus (Debian's package;
// scripts/prerequisites.sh installs it) scraping a two-process engine: every shipped alert rule loads
// and is silent while the cluster is healthy, the worker alerts fire when the last worker leaves
// (the rules' `for:` shortened in a copy, not waited out), every dashboard query is valid PromQL, and
// the request rate per route is there.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForEveryProcess } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { ROOT, startEngine, startWorker, stopAll, WORKER_READY_MS } from '../support/processes.js';
import type { PrometheusHandle } from '../support/prometheus.js';
import { startPrometheus } from '../support/prometheus.js';

const SHIPPED_ALERTS = readFileSync(join(ROOT, 'deploy', 'prometheus', 'alerts.yml'), 'utf8');
const SHIPPED_RULES = [...SHIPPED_ALERTS.matchAll(/- alert: (\w+)/g)].map((m) => m[1]);
// The shipped rules with every `for:` at 1 s: the same expressions, evaluated every second.
const RULES_DIR = mkdtempSync(join(tmpdir(), 'switchyard-rules-'));
const ALERTS = join(RULES_DIR, 'alerts.yml');
writeFileSync(ALERTS, SHIPPED_ALERTS.replace(/for: \d+[smh]/g, 'for: 1s'));
const dashboard = JSON.parse(readFileSync(join(ROOT, 'deploy', 'grafana-dashboard.json'), 'utf8')) as {
  panels: { title: string; targets: { expr: string }[] }[];
};

describe('Prometheus scraping a two-process engine (deploy/prometheus, deploy/grafana-dashboard.json)', () => {
  let engine: EngineHandle;
  let worker: WorkerHandle;
  let prometheus: PrometheusHandle;

  beforeAll(async () => {
    engine = await startEngine({ cluster: { processes: 2 }, logLevel: 'info' });
    worker = startWorker('http-worker', engine.workerUrl);
    await waitForEveryProcess(`${engine.httpUrl}/ready`, 2, (s) => s === 200, WORKER_READY_MS);
    prometheus = await startPrometheus(`127.0.0.1:${engine.ports.admin}`, [ALERTS]);
  }, 120_000);
  afterAll(async () => {
    await prometheus?.stop();
    await stopAll(worker, engine);
    rmSync(RULES_DIR, { recursive: true, force: true });
  });

  type Alert = { labels: { alertname: string; route?: string }; state: string };
  const alerts = async (): Promise<Alert[]> => ((await (await fetch(`${prometheus.url}/api/v1/alerts`)).json()) as { data: { alerts: Alert[] } }).data.alerts;
  const evaluated = async (): Promise<boolean> => {
    const body = (await (await fetch(`${prometheus.url}/api/v1/rules`)).json()) as { data: { groups: { rules: { lastEvaluation: string; health: string }[] }[] } };
    return body.data.groups.flatMap((g) => g.rules).every((r) => r.health === 'ok' && !r.lastEvaluation.startsWith('0001'));
  };

  it('loads every shipped alert rule, healthy, and none fires on a healthy cluster', async () => {
    const res = await fetch(`${prometheus.url}/api/v1/rules`);
    const body = (await res.json()) as { data: { groups: { name: string; rules: { name: string; health: string }[] }[] } };
    const rules = body.data.groups.flatMap((g) => g.rules);
    expect(rules.map((r) => r.name).sort()).toEqual([...SHIPPED_RULES].sort());
    expect(rules.length).toBe(8);
    // Several evaluations with data scraped: every rule healthy, no alert pending or firing.
    await waitUntil(async () => (await prometheus.query('max(switchyard_cluster_workers)')).data?.result[0]?.value[1] === '1', 30_000, 'the worker counted cluster-wide');
    await waitUntil(evaluated, 30_000, 'every rule evaluated');
    const settled = Date.now() + 5000;
    while (Date.now() < settled) {
      expect(await alerts()).toEqual([]);
      await new Promise((r) => setTimeout(r, 500));
    }
  });

  it('answers the request rate per route, and every dashboard query', async () => {
    const rate = 'sum by (route) (rate(switchyard_http_requests_total[10s]))';
    await waitUntil(
      async () => {
        for (let i = 0; i < 5; i++) await http(`${engine.httpUrl}/echo/${i}`, { headers: { connection: 'close' } });
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
  });

  it('fires SwitchyardRouteUnserved and SwitchyardNoWorkers when the last worker leaves', async () => {
    await worker.stop();
    await waitUntil(
      async () => {
        const firing = (await alerts()).filter((a) => a.state === 'firing');
        return firing.some((a) => a.labels.alertname === 'SwitchyardNoWorkers') && firing.some((a) => a.labels.alertname === 'SwitchyardRouteUnserved' && a.labels.route === '/echo/:id');
      },
      60_000,
      'the worker alerts to fire',
    );
    // Redis mode is not in use here: the bus alert stays silent.
    expect((await alerts()).some((a) => a.labels.alertname === 'SwitchyardBusOutOfSync')).toBe(false);
  });
});
