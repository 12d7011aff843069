import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { REQUEST_DURATION, REQUESTS_TOTAL, RequestSeries, type RequestPath } from '../../src/observability/request-series.js';

const BOUNDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
type Request = [route: string, method: string, status: number, seconds: number, path: RequestPath];

/** The same requests counted by prom-client's own Counter and Histogram: what the families must equal. */
function promClient(requests: Request[]): Registry {
  const registry = new Registry();
  const counter = new Counter({ name: REQUESTS_TOTAL, help: 'HTTP requests answered, by route pattern, method and status', labelNames: ['route', 'method', 'status'], registers: [registry] });
  const histogram = new Histogram({
    name: REQUEST_DURATION,
    help: 'HTTP request latency, by route pattern and by whether the handler ran on this process (local) or a peer (forwarded)',
    labelNames: ['route', 'path'],
    buckets: BOUNDS,
    registers: [registry],
  });
  for (const [route, method, status, seconds, path] of requests) {
    counter.inc({ route, method, status: String(status) });
    histogram.observe({ route, path }, seconds);
  }
  return registry;
}

function ours(requests: Request[], beforeRead: () => void = () => undefined): { registry: Registry; series: RequestSeries } {
  const registry = new Registry();
  const series = new RequestSeries(registry, BOUNDS, beforeRead);
  for (const request of requests) series.record(...request);
  return { registry, series };
}

/** Deterministic pseudo-random requests: several routes, methods, statuses, both paths, values on and between bounds. */
function requests(count: number, seed: number): Request[] {
  let x = seed;
  const next = (): number => (x = (x * 1103515245 + 12345) % 2147483648) / 2147483648;
  const routes = ['/a', '/b/:id', '/c/*', '(unmatched)'];
  const methods = ['GET', 'POST', 'OTHER'];
  const statuses = [200, 201, 404, 500, 504];
  const out: Request[] = [];
  for (let i = 0; i < count; i++) {
    const pick = next();
    // A value exactly on a bound belongs to that bound's bucket (le); some beyond the last bound.
    const seconds = pick < 0.2 ? (BOUNDS[Math.floor(next() * BOUNDS.length)] as number) : pick < 0.25 ? 31 + next() : next() * next() * 3;
    out.push([routes[Math.floor(next() * routes.length)]!, methods[Math.floor(next() * methods.length)]!, statuses[Math.floor(next() * statuses.length)]!, seconds, next() < 0.7 ? 'local' : 'forwarded']);
  }
  return out;
}

/** Samples by family, sorted: the text format does not order series within a family. */
const samples = (text: string): string[] =>
  text
    .split('\n')
    .filter((line) => line !== '')
    .sort();

describe('RequestSeries', () => {
  it('writes the text prom-client writes for the same requests', async () => {
    const load = requests(2000, 7);
    expect(samples(await ours(load).registry.metrics())).toEqual(samples(await promClient(load).metrics()));
  });

  it('sums across children as prom-client metrics do (the primary aggregates their JSON)', async () => {
    const [one, two] = [requests(700, 1), requests(900, 2)];
    const mine = AggregatorRegistry.aggregate([await ours(one).registry.getMetricsAsJSON(), await ours(two).registry.getMetricsAsJSON()]);
    const theirs = AggregatorRegistry.aggregate([await promClient(one).getMetricsAsJSON(), await promClient(two).getMetricsAsJSON()]);
    expect(samples(await mine.metrics())).toEqual(samples(await theirs.metrics()));
  });

  it('keeps counting a request whose duration is not a number, and leaves its latency out', async () => {
    const { registry } = ours([['/a', 'GET', 200, Number.NaN, 'local']]);
    const text = await registry.metrics();
    expect(text).toContain(`${REQUESTS_TOTAL}{route="/a",method="GET",status="200"} 1`);
    expect(text).not.toContain(`${REQUEST_DURATION}_count`);
  });

  it('forgets a dropped route, runs beforeRead at every read, and reset empties both families', async () => {
    let reads = 0;
    const { registry, series } = ours(
      [
        ['/a', 'GET', 200, 0.01, 'local'],
        ['/b', 'GET', 200, 0.01, 'local'],
      ],
      () => reads++,
    );
    series.drop('/a');
    const text = await registry.metrics();
    expect(text).not.toContain('route="/a"');
    expect(text).toContain(`${REQUEST_DURATION}_count{route="/b",path="local"} 1`);
    expect(reads).toBe(2);
    expect([...series.routes()]).toEqual(['/b']);
    registry.resetMetrics();
    expect(samples(await registry.metrics()).filter((line) => !line.startsWith('#'))).toEqual([]);
  });
});
