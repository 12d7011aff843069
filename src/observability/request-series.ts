import type { MetricValueWithName, Registry } from 'prom-client';

/** Where a request's handler ran: on this process, or on a peer it was forwarded to. */
export type RequestPath = 'local' | 'forwarded';

interface Durations {
  /** Observations per bucket, not cumulative; the last slot counts those above every bound. */
  readonly buckets: Float64Array;
  sum: number;
  count: number;
}

interface RouteSeries {
  /** Method label → status → requests. */
  readonly statuses: Map<string, Map<number, number>>;
  local: Durations | undefined;
  forwarded: Durations | undefined;
}

/** The part of a prom-client metric the Registry and AggregatorRegistry read. */
interface ExportedMetric {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'histogram';
  readonly aggregator: 'sum';
  get(): Promise<{ name: string; help: string; type: 'counter' | 'histogram'; aggregator: 'sum'; values: MetricValueWithName<string>[] }>;
  reset(): void;
}

export const REQUESTS_TOTAL = 'switchyard_http_requests_total';
export const REQUEST_DURATION = 'switchyard_http_request_duration_seconds';

/**
 * The two request metric families, `switchyard_http_requests_total{route,method,status}` and
 * `switchyard_http_request_duration_seconds{route,path}`, counted in plain numbers on the request
 * path and written out in prom-client's metric JSON only when /metrics is read.
 *
 * Why not prom-client's Counter and Histogram: each `inc`/`observe` with labels validates them,
 * builds a key string from every label and looks it up as a property name, so V8 hashes and
 * internalises a new string twice per request — about 9,000 instructions of a lone request's
 * ~225,000 in the engine child (docs/performance.md, "Instructions per request"). Here a request
 * finds its series through the route's pattern string (the same string object on every request, its
 * hash cached) and a small map per method, and adds to numbers.
 *
 * The output is what prom-client's own metrics give for the same observations — same names, labels
 * and label order, cumulative buckets, `+Inf`, `_sum`, `_count`, aggregator `sum` — so the primary's
 * AggregatorRegistry sums them across children as before (test/unit/request-series.test.ts holds it
 * to a prom-client Counter and Histogram fed the same requests).
 */
export class RequestSeries {
  /** Route label → its series, in the order routes first served a request. */
  private readonly byRoute = new Map<string, RouteSeries>();
  private readonly bounds: readonly number[];

  /** `beforeRead`: runs before either family is read (drops routes that left the table). */
  constructor(registry: Registry, bounds: readonly number[], beforeRead: () => void) {
    this.bounds = [...bounds].sort((a, b) => a - b);
    const family = (name: string, help: string, type: 'counter' | 'histogram', values: () => MetricValueWithName<string>[]): ExportedMetric => ({
      name,
      help,
      type,
      aggregator: 'sum',
      get: () => {
        beforeRead();
        return Promise.resolve({ name, help, type, aggregator: 'sum' as const, values: values() });
      },
      reset: () => this.byRoute.clear(),
    });
    // Registry.registerMetric is typed for prom-client's own classes; it reads only what ExportedMetric has.
    const register = (metric: ExportedMetric): void => registry.registerMetric(metric as unknown as Parameters<Registry['registerMetric']>[0]);
    register(family(REQUESTS_TOTAL, 'HTTP requests answered, by route pattern, method and status', 'counter', () => this.countValues()));
    register(
      family(
        REQUEST_DURATION,
        'HTTP request latency, by route pattern and by whether the handler ran on this process (local) or a peer (forwarded)',
        'histogram',
        () => this.durationValues(),
      ),
    );
  }

  /** One answered request. `methodLabel` is already bounded (KNOWN_METHODS or OTHER). */
  record(route: string, methodLabel: string, status: number, seconds: number, path: RequestPath): void {
    let series = this.byRoute.get(route);
    if (series === undefined) {
      series = { statuses: new Map(), local: undefined, forwarded: undefined };
      this.byRoute.set(route, series);
    }
    let statuses = series.statuses.get(methodLabel);
    if (statuses === undefined) {
      statuses = new Map();
      series.statuses.set(methodLabel, statuses);
    }
    statuses.set(status, (statuses.get(status) ?? 0) + 1);
    // prom-client refuses a value that is not finite (it throws); the request still counts.
    if (!Number.isFinite(seconds)) return;
    let durations = series[path];
    if (durations === undefined) {
      durations = { buckets: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 };
      series[path] = durations;
    }
    // The first bucket whose bound is ≥ the value (`le`), as prom-client counts it.
    const bounds = this.bounds;
    let bucket = 0;
    while (bucket < bounds.length && seconds > (bounds[bucket] as number)) bucket++;
    durations.buckets[bucket] = (durations.buckets[bucket] as number) + 1;
    durations.sum += seconds;
    durations.count++;
  }

  /** The routes with series (for dropping those that left the table). */
  routes(): IterableIterator<string> {
    return this.byRoute.keys();
  }

  /** Forgets every series of `route`: a route that comes back counts from zero. */
  drop(route: string): void {
    this.byRoute.delete(route);
  }

  private countValues(): MetricValueWithName<string>[] {
    const values: MetricValueWithName<string>[] = [];
    for (const [route, series] of this.byRoute) {
      for (const [method, statuses] of series.statuses) {
        for (const [status, count] of statuses) values.push({ value: count, labels: { route, method, status: String(status) } });
      }
    }
    return values;
  }

  private durationValues(): MetricValueWithName<string>[] {
    const values: MetricValueWithName<string>[] = [];
    const bucketName = `${REQUEST_DURATION}_bucket`;
    for (const [route, series] of this.byRoute) {
      for (const path of ['local', 'forwarded'] as const) {
        const durations = series[path];
        if (durations === undefined) continue;
        let cumulative = 0;
        this.bounds.forEach((bound, i) => {
          cumulative += durations.buckets[i] as number;
          values.push({ value: cumulative, labels: { le: bound, route, path }, metricName: bucketName });
        });
        values.push({ value: durations.count, labels: { le: '+Inf', route, path }, metricName: bucketName });
        values.push({ value: durations.sum, labels: { route, path }, metricName: `${REQUEST_DURATION}_sum` });
        values.push({ value: durations.count, labels: { route, path }, metricName: `${REQUEST_DURATION}_count` });
      }
    }
    return values;
  }
}
