import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { EngineMetrics } from '../../src/observability/metrics.js';
import { mergeExpositions } from '../../src/observability/cluster-metrics.js';
import { ModuleMetrics } from '../../src/modules/module-metrics.js';

const sources = { connectedWorkers: () => 0, localFunctions: () => 0, routes: () => 0, tableVersion: () => 0, inFlight: () => 0, openChannels: () => 0, channelBufferedBytes: () => 0, partialFrameBytes: () => 0, queuedBytes: () => 0, callBytes: () => 0, telemetrySockets: () => 0, clusterWorkers: () => 0, routeWorkers: () => [], busSynced: () => true, memoryBoundBytes: () => 0, streamsHoldingHeap: () => 0, pid: 0 };

/** Sample lines of `name` (counter or histogram series) that carry `route="<route>"`. */
async function linesFor(metrics: EngineMetrics, route: string): Promise<string[]> {
  const text = await metrics.registry.metrics();
  return text.split('\n').filter((line) => line.startsWith('switchyard_http_request') && line.includes(`route="${route}"`));
}

describe('EngineMetrics.retainRoutes', () => {
  it('drops every request series of routes that left the table and keeps the others', async () => {
    const metrics = new EngineMetrics(sources);
    metrics.request('/gone/:id', 'GET', 200, 0.01, false);
    metrics.request('/gone/:id', 'POST', 500, 0.02, true);
    metrics.request('/kept', 'GET', 200, 0.01, false);
    metrics.request(undefined, 'GET', 404, 0.001, false);
    // Counter (2 series) + histogram (2 series × (15 buckets + +Inf + sum + count)).
    expect(await linesFor(metrics, '/gone/:id')).toHaveLength(2 + 2 * 18);

    metrics.retainRoutes(new Set(['/kept']));

    expect(await linesFor(metrics, '/gone/:id')).toEqual([]);
    expect(await linesFor(metrics, '/kept')).toHaveLength(1 + 18);
    // Unmatched requests are one fixed label, never a table route: always kept.
    expect(await linesFor(metrics, '(unmatched)')).toHaveLength(1 + 18);
    const text = await metrics.registry.metrics();
    expect(text).toContain('switchyard_http_requests_total{route="/kept",method="GET",status="200"} 1');
  });

  it('drops, at the next scrape, a series recorded for a route that already left the table', async () => {
    const metrics = new EngineMetrics(sources);
    metrics.request('/kept', 'GET', 200, 0.01, false);
    metrics.retainRoutes(new Set(['/kept']));
    // A request that matched /late on an older table view finishes after the rebuild.
    metrics.request('/late', 'GET', 503, 0.01, true);
    expect(await linesFor(metrics, '/late')).toEqual([]);
    expect(await linesFor(metrics, '/kept')).toHaveLength(1 + 18);
  });

  it('keeps every series until the table first reports its routes', async () => {
    const metrics = new EngineMetrics(sources);
    metrics.request('/early', 'GET', 200, 0.01, false);
    expect(await linesFor(metrics, '/early')).toHaveLength(1 + 18);
  });

  it('lets a route that comes back count again from zero', async () => {
    const metrics = new EngineMetrics(sources);
    metrics.request('/again', 'GET', 200, 0.01, false);
    metrics.request('/again', 'GET', 200, 0.01, false);
    metrics.retainRoutes(new Set());
    metrics.retainRoutes(new Set(['/again']));
    metrics.request('/again', 'GET', 200, 0.01, false);
    expect(await metrics.registry.metrics()).toContain('switchyard_http_requests_total{route="/again",method="GET",status="200"} 1');
    metrics.retainRoutes(new Set());
    expect(await linesFor(metrics, '/again')).toEqual([]);
  });
});

describe('EngineMetrics.routesLeft', () => {
  it("drops at once the series of the routes a change removed, reading the table's live view", async () => {
    const metrics = new EngineMetrics(sources);
    const table = new Set(['/a', '/b']);
    metrics.retainRoutes({ has: (route) => table.has(route) });
    metrics.request('/a', 'GET', 200, 0.01, false);
    metrics.request('/b', 'GET', 200, 0.01, false);
    table.delete('/a');
    metrics.routesLeft(['/a']);
    expect(await linesFor(metrics, '/a')).toEqual([]);
    expect(await linesFor(metrics, '/b')).toHaveLength(1 + 18);
    // A route named as left but routed again by then keeps its series.
    metrics.routesLeft(['/b']);
    expect(await linesFor(metrics, '/b')).toHaveLength(1 + 18);
  });

  it('keeps every series while the table has not reported its routes', async () => {
    const metrics = new EngineMetrics(sources);
    metrics.request('/a', 'GET', 200, 0.01, false);
    metrics.routesLeft(['/a']);
    expect(await linesFor(metrics, '/a')).toHaveLength(1 + 18);
  });
});

describe('EngineMetrics.errorReply', () => {
  it('counts error envelopes by code, and a worker\'s free-text codes past 100 distinct ones as other', async () => {
    const metrics = new EngineMetrics(sources);
    metrics.errorReply('TIMEOUT');
    metrics.errorReply('TIMEOUT');
    for (let i = 0; i < 150; i++) metrics.errorReply(`worker_code_${i}`);
    const lines = (await metrics.registry.metrics()).split('\n').filter((l) => l.startsWith('switchyard_http_errors_total{'));
    expect(lines).toContain('switchyard_http_errors_total{code="TIMEOUT"} 2');
    expect(lines).toContain('switchyard_http_errors_total{code="other"} 51');
    expect(lines).toHaveLength(101);
  });
});

describe('ModuleMetrics.functionCall', () => {
  it('counts module function calls by outcome: ok always, error codes past 50 distinct ones as other', async () => {
    const registry = new Registry();
    const metrics = new ModuleMetrics(registry);
    for (let i = 0; i < 3; i++) metrics.functionCall('state::get', 'ok');
    for (let i = 0; i < 60; i++) metrics.functionCall('state::set', `code_${i}`);
    metrics.functionCall('state::set', 'code_0');
    metrics.functionCall('state::get', 'ok');
    const lines = (await registry.metrics()).split('\n').filter((l) => l.startsWith('switchyard_module_function_calls_total{'));
    expect(lines).toContain('switchyard_module_function_calls_total{function="state::get",outcome="ok"} 4');
    expect(lines).toContain('switchyard_module_function_calls_total{function="state::set",outcome="code_0"} 2');
    expect(lines).toContain('switchyard_module_function_calls_total{function="state::set",outcome="code_49"} 1');
    expect(lines).toContain('switchyard_module_function_calls_total{function="state::set",outcome="other"} 10');
    expect(lines).toHaveLength(52);
  });
});

describe('cluster-wide gauges', () => {
  it('exports the cluster worker count, workers per route and the bus state', async () => {
    let synced = true;
    const metrics = new EngineMetrics({
      ...sources,
      clusterWorkers: () => 2,
      routeWorkers: () => [{ method: 'GET', route: '/a/:id', workers: 2 }, { method: 'POST', route: '/b', workers: 0 }],
      busSynced: () => synced,
      memoryBoundBytes: () => 0,
      pid: 0,
    });
    let text = await metrics.registry.metrics();
    expect(text).toContain('switchyard_cluster_workers 2');
    expect(text).toContain('switchyard_route_workers{method="GET",route="/a/:id"} 2');
    expect(text).toContain('switchyard_route_workers{method="POST",route="/b"} 0');
    expect(text).toContain('switchyard_bus_in_sync 1');
    synced = false;
    text = await metrics.registry.metrics();
    expect(text).toContain('switchyard_bus_in_sync 0');
  });
});

describe('switchyard_memory_bound_bytes', () => {
  it('is one series labelled with the pid the process was given, so the primary keeps the children apart', async () => {
    const metrics = new EngineMetrics({ ...sources, pid: 4242, memoryBoundBytes: () => 576_716_800 });
    const text = await metrics.registry.metrics();
    expect(text.split('\n').filter((line) => line.startsWith('switchyard_memory_bound_bytes{'))).toEqual(['switchyard_memory_bound_bytes{pid="4242"} 576716800']);
  });
});

describe('mergeExpositions', () => {
  it('writes a family both pages have once, with the samples of both, and keeps every other family as it was', () => {
    const own = ['# HELP a_total A', '# TYPE a_total counter', 'a_total 1', '# HELP shared Shared', '# TYPE shared gauge', 'shared{pid="1"} 10', ''].join('\n');
    const children = ['# HELP shared Shared', '# TYPE shared gauge', 'shared{pid="2"} 20', 'shared{pid="3"} 30', '', '# HELP b B', '# TYPE b gauge', 'b 2', ''].join('\n');
    const merged = mergeExpositions(own, children);
    expect(merged.split('\n')).toEqual([
      '# HELP a_total A', '# TYPE a_total counter', 'a_total 1',
      '# HELP shared Shared', '# TYPE shared gauge', 'shared{pid="1"} 10', 'shared{pid="2"} 20', 'shared{pid="3"} 30',
      '# HELP b B', '# TYPE b gauge', 'b 2', '',
    ]);
  });
});
