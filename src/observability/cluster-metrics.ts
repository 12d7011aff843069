import { AggregatorRegistry, Counter, Registry } from 'prom-client';
import { memoryBoundGauge } from './metrics.js';

/** The primary's side: its own metrics plus every child's, aggregated. */
export class ClusterMetrics {
  readonly registry = new Registry();
  private readonly aggregator = new AggregatorRegistry();
  readonly childRestarts: Counter;

  constructor(memoryBound?: { pid: number; bytes: () => number }) {
    this.childRestarts = new Counter({ name: 'switchyard_child_restarts_total', help: 'Engine children restarted after they exited', registers: [this.registry] });
    if (memoryBound !== undefined) memoryBoundGauge([this.registry], memoryBound.pid, memoryBound.bytes);
  }

  async render(): Promise<{ contentType: string; body: string }> {
    const [children, own] = await Promise.all([this.aggregator.clusterMetrics(), this.registry.metrics()]);
    return { contentType: this.registry.contentType, body: mergeExpositions(own, children) };
  }
}

/**
 * Two Prometheus text expositions as one: a family both have (the primary's and the children's
 * `switchyard_memory_bound_bytes`) is written once, its HELP and TYPE from `first`, then the samples of
 * both. Written one after the other, such a family had two HELP lines, which the text format forbids
 * (`promtool check metrics` refuses the page; stricter scrapers drop it whole).
 */
export function mergeExpositions(first: string, second: string): string {
  const families = new Map<string, string[]>();
  const read = (text: string): void => {
    let current: string[] | undefined;
    for (const line of text.split('\n')) {
      if (line === '') continue;
      const help = /^# HELP (\S+)/.exec(line);
      if (help !== null) {
        const name = help[1]!;
        current = families.get(name);
        // A family seen already: its HELP and TYPE are written; only its samples are added.
        if (current === undefined) families.set(name, (current = [line]));
        continue;
      }
      if (current === undefined) families.set(line, (current = [line]));
      else if (!(line.startsWith('# TYPE ') && current.some((known) => known.startsWith('# TYPE ')))) current.push(line);
    }
  };
  read(first);
  read(second);
  return `${[...families.values()].map((lines) => lines.join('\n')).join('\n')}\n`;
}
