/**
 * What one forwarding hop costs, by transport: a closed loop of concurrent calls through
 *   (a) the local invoker directly (no hop),
 *   (b) the framed stream (ForwardClient → ForwardServer) over a Unix socket,
 *   (c) the same over TCP loopback,
 *   (d) undici HTTP/1.1 (Pool, POST, msgpack body) over a Unix socket,
 * with ~1 KiB and ~64 KiB payloads. The far end runs in a child process (as a peer would) and echoes
 * through a fake local invoker, so the numbers are transport only, no worker.
 *
 *   npx tsx bench/forward-hop.ts            full run (~30 s)
 *   npx tsx bench/forward-hop.ts --smoke    a couple of seconds, for CI: checks it runs and answers
 *   options: --concurrency N  --seconds S
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Packr } from 'msgpackr';
import pino from 'pino';
import { ForwardClient } from '../src/forwarding/forward-client.js';
import type { InvocationOutcome } from '../src/invocation/invoker.js';
import { EchoInvoker } from './forward-hop/echo-invoker.js';
import { HttpHopClient } from './forward-hop/http-hop.js';
import type { LoadResult } from './forward-hop/load.js';
import { closedLoop } from './forward-hop/load.js';
import type { ServerAddresses } from './forward-hop/server.js';
import { BENCH_CLUSTER, BENCH_SECRET } from './forward-hop/server.js';

const args = process.argv.slice(2);
const smoke = args.includes('--smoke');
const argValue = (name: string, fallback: number): number => {
  const index = args.indexOf(name);
  const value = index === -1 ? undefined : Number(args[index + 1]);
  return value === undefined || !Number.isFinite(value) ? fallback : value;
};
const concurrency = argValue('--concurrency', 64);
const hopSeconds = argValue('--seconds', smoke ? 0.25 : 3);
const directSeconds = smoke ? 0.2 : 1.5;
const warmupMs = smoke ? 100 : 500;
const DEADLINE_MS = 10_000;

/** An ApiRequest-shaped value whose msgpack encoding is about `bytes` long. */
function payload(bytes: number): Record<string, unknown> {
  const base = {
    path: '/orders/42',
    method: 'POST',
    path_params: { id: '42' },
    query_params: { expand: 'items' },
    headers: { 'content-type': 'application/json', 'user-agent': 'bench', 'x-request-id': 'f3b0c442-98fc-1c14' },
    body: { note: '' },
  };
  const overhead = new Packr({ useRecords: false }).pack(base).length;
  return { ...base, body: { note: 'x'.repeat(Math.max(0, bytes - overhead)) } };
}

const isEcho = (outcome: InvocationOutcome, sent: unknown): boolean =>
  outcome.ok && typeof outcome.value === 'object' && outcome.value !== null && (outcome.value as { path?: unknown }).path === (sent as { path: unknown }).path;

interface Row {
  transport: string;
  payload: string;
  result: LoadResult;
  baseline: LoadResult;
}

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' });
  const child = fork(fileURLToPath(new URL('./forward-hop/server.ts', import.meta.url)), [], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const [addresses] = (await once(child, 'message')) as [ServerAddresses];
  const clientOptions = { secret: BENCH_SECRET, cluster: BENCH_CLUSTER, selfPeerId: 'bench-client', logger };
  const uds = new ForwardClient({ socketPath: addresses.framedSocketPath }, clientOptions);
  const tcp = new ForwardClient({ host: '127.0.0.1', port: addresses.tcpPort }, clientOptions);
  // HTTP/1.1 has one call in flight per connection, so it gets one connection per concurrent caller.
  const http = new HttpHopClient(addresses.httpSocketPath, concurrency);
  const direct = new EchoInvoker();

  const loop = (seconds: number, call: () => Promise<boolean>): Promise<LoadResult> =>
    closedLoop(call, { concurrency, durationMs: seconds * 1000, warmupMs });
  const framed = (client: ForwardClient, data: unknown) => async (): Promise<boolean> => {
    const result = await client.invoke('bench::echo', data, { deadline: performance.now() + DEADLINE_MS });
    return result.dispatched && isEcho(result.outcome, data);
  };

  const rows: Row[] = [];
  for (const [label, bytes] of [['1 KiB', 1024], ['64 KiB', 64 * 1024]] as const) {
    const data = payload(bytes);
    const baseline = await loop(directSeconds, async () => isEcho(await direct.invoke('bench::echo', data, { deadline: performance.now() + DEADLINE_MS }), data));
    rows.push({ transport: '(a) direct, no hop', payload: label, result: baseline, baseline });
    rows.push({ transport: '(b) framed stream, UDS', payload: label, result: await loop(hopSeconds, framed(uds, data)), baseline });
    rows.push({ transport: '(c) framed stream, TCP loopback', payload: label, result: await loop(hopSeconds, framed(tcp, data)), baseline });
    const viaHttp = async (): Promise<boolean> => isEcho(await http.invoke('bench::echo', data, performance.now() + DEADLINE_MS), data);
    rows.push({ transport: '(d) undici HTTP/1.1, UDS', payload: label, result: await loop(hopSeconds, viaHttp), baseline });
  }

  await Promise.all([uds.close(), tcp.close(), http.close()]);
  child.disconnect();
  await once(child, 'exit');

  printTable(rows);
  const failed = rows.filter((row) => row.result.errors > 0 || row.result.calls === 0);
  if (failed.length > 0) {
    console.error(`wrong or missing answers in: ${failed.map((row) => `${row.transport} ${row.payload}`).join(', ')}`);
    process.exitCode = 1;
  }
}

function printTable(rows: Row[]): void {
  const us = (value: number): string => (value >= 1000 ? `${(value / 1000).toFixed(2)} ms` : `${Math.round(value)} µs`);
  const ratio = (value: number): string => `${value >= 10 ? value.toFixed(0) : value >= 1 ? value.toFixed(2) : value.toFixed(4)}×`;
  console.log(
    `\nforward hop, closed loop, ${concurrency} concurrent calls, ${hopSeconds} s per hop after ${warmupMs} ms warm-up, ` +
      `Node ${process.version}, ${availableParallelism()} CPUs${smoke ? ' (smoke run: numbers are not meaningful)' : ''}\n`,
  );
  console.log('| transport | payload | calls/s | calls/s ÷ (a) | p50 | p99 | p50 ÷ (a) | p99 ÷ (a) |');
  console.log('|---|---|---:|---:|---:|---:|---:|---:|');
  for (const { transport, payload: label, result, baseline } of rows) {
    console.log(
      `| ${transport} | ${label} | ${Math.round(result.callsPerSecond).toLocaleString('en-US')} | ${ratio(result.callsPerSecond / baseline.callsPerSecond)} | ` +
        `${us(result.p50Us)} | ${us(result.p99Us)} | ${ratio(result.p50Us / baseline.p50Us)} | ${ratio(result.p99Us / baseline.p99Us)} |`,
    );
  }
}

await main();
