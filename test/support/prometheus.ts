import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import type { ManagedProcess } from './processes.js';
import { spawnManaged, stopProcess } from './processes.js';
import { freePort } from './redis.js';

/** The `prometheus` binary on PATH. Tests install nothing: scripts/prerequisites.sh does (README, Quick start). */
export function prometheusBinary(): string {
  const found = spawnSync('sh', ['-c', 'command -v prometheus'], { encoding: 'utf8' }).stdout.trim();
  if (found === '') throw new Error('prometheus is not installed: run scripts/prerequisites.sh (README, Quick start)');
  return found;
}

export interface PrometheusHandle {
  url: string;
  process: ManagedProcess;
  /** An instant query through the HTTP API. */
  query(promql: string): Promise<{ status: string; data?: { result: { metric: Record<string, string>; value: [number, string] }[] }; error?: string }>;
  stop(): Promise<void>;
}

/** A real Prometheus on a free loopback port, scraping `targets` (host:port) every second. */
export async function startPrometheus(targets: string | string[], ruleFiles: string[] = []): Promise<PrometheusHandle> {
  const config = [
    'global: { scrape_interval: 1s, evaluation_interval: 1s }',
    `rule_files: [${ruleFiles.map((f) => JSON.stringify(f)).join(', ')}]`,
    'scrape_configs:',
    '  - job_name: switchyard',
    `    static_configs: [{ targets: ${JSON.stringify([targets].flat())} }]`,
  ].join('\n');
  return startPrometheusWithConfig(config);
}

/**
 * A real Prometheus on a free loopback port with `config` as its prometheus.yml; `files` (name → text)
 * are written beside it, so a relative `rule_files` entry (the shipped config's `alerts.yml`) resolves.
 */
export async function startPrometheusWithConfig(config: string, files: Record<string, string> = {}): Promise<PrometheusHandle> {
  const binary = prometheusBinary();
  const dir = await mkdtemp(join(tmpdir(), 'switchyard-prom-'));
  const port = await freePort();
  await writeFile(join(dir, 'prometheus.yml'), config);
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  const process = spawnManaged(binary, [
    `--config.file=${join(dir, 'prometheus.yml')}`,
    `--storage.tsdb.path=${join(dir, 'data')}`,
    `--web.listen-address=127.0.0.1:${port}`,
  ], { ...globalThis.process.env });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const res = await request(`${url}/-/ready`);
      await res.body.dump();
      if (res.statusCode === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`prometheus did not become ready:\n${process.stderr.lines.slice(-10).join('\n')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    process,
    query: async (promql) => {
      const res = await request(`${url}/api/v1/query?query=${encodeURIComponent(promql)}`);
      return (await res.body.json()) as Awaited<ReturnType<PrometheusHandle['query']>>;
    },
    stop: async () => {
      await stopProcess(process, 'SIGTERM', 10_000);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
