// deploy/prometheus and deploy/grafana-dashboard.json against a real Prometheus (Debian's package,
// installed when missing) scraping a two-process engine: the alert rules load, every dashboard query
// is valid PromQL, and the request rate per route is there.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForEveryProcess } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle, WorkerHandle } from '../support/processes.js';
import { ROOT, startEngine, startWorker, stopAll, WORKER_READY_MS } from '../support/processes.js';
import type { PrometheusHandle } from '../support/prometheus.js';
import { startPrometheus } from '../support/prometheus.js';

const ALERTS = join(ROOT, 'deploy', 'prometheus', 'alerts.yml');
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
  });

  it('loads the alert rules', async () => {
    const res = await fetch(`${prometheus.url}/api/v1/rules`);
    const body = (await res.json()) as { data: { groups: { name: string; rules: { name: string; health: string }[] }[] } };
    const rules = body.data.groups.flatMap((g) => g.rules);
    expect(rules.map((r) => r.name)).toContain('SwitchyardHighErrorRate');
    expect(rules.length).toBe(6);
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
});
