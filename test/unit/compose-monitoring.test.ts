// docker-compose.yml's monitoring services, checked statically (no Docker daemon here): Prometheus with
// the shipped scrape config and alert rules, Grafana with the shipped dashboard provisioned over it.
// Every file the services reference is mounted from the repository, the paths inside the containers
// agree with each other (rule_files, the dashboard provider's path, the datasource URL), and the scrape
// targets are the engine service on the admin port deploy/switchyard.yaml binds.
// test/integration/compose-topology.test.ts runs the same topology without Docker.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { loadConfigText } from '../../src/config/load.js';
import { ROOT } from '../support/processes.js';
import type { Service } from '../support/compose.js';
import { mounts } from '../support/compose.js';

const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const compose = parseYaml(read('docker-compose.yml')) as { services: Record<string, Service> };
const services = compose.services;

/** The repository file mounted at `target` in `service` (a file mount, or a file under a directory mount). */
function mountedFile(service: Service, target: string): string | undefined {
  for (const m of mounts(service)) {
    if (m.target === target) return posix.normalize(m.source);
    if (target.startsWith(`${m.target}/`)) return posix.join(m.source, target.slice(m.target.length + 1));
  }
  return undefined;
}
/** Published ports as { host ip, published, target }. */
function ports(service: Service): { ip: string; published: number; target: number }[] {
  return (service.ports ?? []).map((p: any) => {
    if (typeof p === 'object') return { ip: p.host_ip ?? '', published: Number(p.published), target: Number(p.target) };
    const parts = String(p).split(':');
    const [ip, published, target] = parts.length === 3 ? parts : ['', parts[0], parts[1] ?? parts[0]];
    return { ip: ip ?? '', published: Number(published), target: Number(target) };
  });
}
const flag = (command: string[], name: string) => command.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

const prometheus = services.prometheus ?? {};
const grafana = services.grafana ?? {};
const promCommand: string[] = Array.isArray(prometheus.command) ? prometheus.command : String(prometheus.command ?? '').split(/\s+/);
const PROM_CONFIG = flag(promCommand, 'config.file') ?? '/etc/prometheus/prometheus.yml';
const engineConfig = loadConfigText(read('deploy/switchyard.yaml'), 'yaml', { REDIS_URL: 'redis://redis:6379', CLUSTER_SECRET: 'static-check' }, 'deploy/switchyard.yaml');

describe('docker-compose.yml: prometheus', () => {
  it('runs a pinned Prometheus image, published on loopback only', () => {
    expect(prometheus.image).toMatch(/^prom\/prometheus:v\d+\.\d+\.\d+$/);
    const listen = flag(promCommand, 'web.listen-address') ?? ':9090';
    const port = Number(listen.split(':').at(-1));
    expect(ports(prometheus)).toStrictEqual([{ ip: '127.0.0.1', published: port, target: port }]);
  });

  it('mounts deploy/prometheus/prometheus.yml where --config.file points, read-only', () => {
    expect(mountedFile(prometheus, PROM_CONFIG)).toBe('deploy/prometheus/prometheus.yml');
    expect(mounts(prometheus).every((m) => m.readOnly)).toBe(true);
    expect(flag(promCommand, 'storage.tsdb.path')).toBeDefined();
  });

  const shipped = parseYaml(read('deploy/prometheus/prometheus.yml')) as {
    rule_files: string[];
    scrape_configs: { job_name: string; metrics_path?: string; static_configs?: { targets: string[] }[]; dns_sd_configs?: { names: string[]; type?: string; port: number }[] }[];
  };

  it('every rule file the config names is mounted beside it, from deploy/prometheus/, and is the shipped rules', () => {
    expect(shipped.rule_files.length).toBeGreaterThan(0);
    for (const file of shipped.rule_files) {
      const inContainer = posix.resolve(posix.dirname(PROM_CONFIG), file);
      const source = mountedFile(prometheus, inContainer);
      expect(source, `${inContainer} is not mounted`).toBe('deploy/prometheus/alerts.yml');
      const rules = parseYaml(read(source!)) as { groups: { rules: { alert: string; expr: string }[] }[] };
      expect(rules.groups.flatMap((g) => g.rules).length).toBeGreaterThan(0);
    }
  });

  it('scrapes the engine service (every replica) on the admin port the engine binds, at /metrics', () => {
    const jobs = shipped.scrape_configs.filter((j) => j.job_name === 'switchyard');
    expect(jobs).toHaveLength(1);
    const job = jobs[0]!;
    expect(job.metrics_path ?? '/metrics').toBe('/metrics');
    const targets = [
      ...(job.static_configs ?? []).flatMap((c) => c.targets.map((t) => ({ host: t.split(':')[0] ?? '', port: Number(t.split(':')[1]) }))),
      ...(job.dns_sd_configs ?? []).flatMap((c) => {
        // A (and AAAA) records of a compose service name: one per replica. SRV would need a port in DNS.
        expect(c.type ?? 'SRV').toBe('A');
        return c.names.map((host) => ({ host, port: c.port }));
      }),
    ];
    expect(targets.length).toBeGreaterThan(0);
    for (const target of targets) {
      // Every target is a compose service that runs the engine image (not a container name, which
      // replicas do not have), on the admin port.
      expect(Object.keys(services), `${target.host} is not a compose service`).toContain(target.host);
      expect(services[target.host]!.build === '.' || services[target.host]!.build?.context === '.', `${target.host} is not the engine`).toBe(true);
      expect(target.port).toBe(engineConfig.admin.port);
    }
    expect(targets.map((t) => t.host)).toContain('engine');
    // Reachable from another container: the admin listener binds every interface, and the port is exposed.
    expect(engineConfig.admin.host).toBe('0.0.0.0');
    expect((services.engine!.expose ?? []).map(String)).toContain(String(engineConfig.admin.port));
  });
});

describe('docker-compose.yml: grafana', () => {
  it('runs a pinned Grafana image, published on loopback only, after prometheus', () => {
    expect(grafana.image).toMatch(/^grafana\/grafana(-oss)?:\d+\.\d+\.\d+$/);
    expect(ports(grafana)).toStrictEqual([{ ip: '127.0.0.1', published: 3000, target: 3000 }]);
    expect(Object.keys(grafana.depends_on ?? {})).toContain('prometheus');
    expect(mounts(grafana).every((m) => m.readOnly)).toBe(true);
  });

  const provisioned = (kind: 'datasources' | 'dashboards') =>
    mounts(grafana).filter((m) => m.target.startsWith(`/etc/grafana/provisioning/${kind}/`) && /\.ya?ml$/.test(m.target));

  it('provisions the compose prometheus service as the default Prometheus datasource', () => {
    const files = provisioned('datasources');
    expect(files).toHaveLength(1);
    const file = parseYaml(read(files[0]!.source)) as { apiVersion: number; datasources: { type: string; url: string; isDefault?: boolean; access?: string }[] };
    expect(file.apiVersion).toBe(1);
    expect(file.datasources).toHaveLength(1);
    const ds = file.datasources[0]!;
    expect(ds).toMatchObject({ type: 'prometheus', isDefault: true, access: 'proxy' });
    const url = new URL(ds.url);
    expect(url.hostname).toBe('prometheus');
    expect(Number(url.port)).toBe(ports(prometheus)[0]!.target);
  });

  it('provisions deploy/grafana-dashboard.json through a file provider whose path holds it', () => {
    const files = provisioned('dashboards');
    expect(files).toHaveLength(1);
    const file = parseYaml(read(files[0]!.source)) as { apiVersion: number; providers: { type: string; options: { path: string } }[] };
    expect(file.apiVersion).toBe(1);
    expect(file.providers).toHaveLength(1);
    const provider = file.providers[0]!;
    expect(provider.type).toBe('file');
    const dashboards = mounts(grafana).filter((m) => posix.dirname(m.target) === provider.options.path || m.target === provider.options.path);
    expect(dashboards.map((m) => m.source)).toStrictEqual(['./deploy/grafana-dashboard.json']);
    expect(dashboards[0]!.target).toMatch(/\.json$/);
    const home = grafana.environment?.GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH;
    if (home !== undefined) expect(home).toBe(dashboards[0]!.target);
  });

  it('the dashboard asks for a Prometheus datasource (the provisioned one), in every panel', () => {
    const dashboard = JSON.parse(read('deploy/grafana-dashboard.json')) as {
      uid: string;
      templating: { list: { name: string; type: string; query: string }[] };
      panels: { title: string; datasource: { type: string; uid: string }; targets: { expr: string }[] }[];
    };
    expect(dashboard.uid).toMatch(/^[\w-]+$/);
    const variable = dashboard.templating.list.find((v) => v.type === 'datasource');
    expect(variable).toMatchObject({ query: 'prometheus' });
    for (const panel of dashboard.panels) {
      expect(panel.datasource, panel.title).toStrictEqual({ type: 'prometheus', uid: `\${${variable!.name}}` });
      expect(panel.targets.length, panel.title).toBeGreaterThan(0);
    }
  });
});

describe('docker-compose.yml: every file a service mounts', () => {
  it('exists in the repository as a file', () => {
    for (const [name, service] of Object.entries(services)) {
      for (const m of mounts(service)) {
        expect(m.source.startsWith('./'), `${name}: ${m.source} is not a repository path`).toBe(true);
        expect(existsSync(join(ROOT, m.source)) && statSync(join(ROOT, m.source)).isFile(), `${name}: ${m.source}`).toBe(true);
      }
    }
  });
});
