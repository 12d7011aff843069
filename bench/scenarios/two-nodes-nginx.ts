import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { nginxBinary } from '../../test/support/nginx.js';
import type { EngineHandle, ManagedProcess } from '../../test/support/processes.js';
import { ROOT, spawnManaged, startEngine, stopProcess } from '../../test/support/processes.js';
import type { RedisServer } from '../../test/support/redis.js';
import { freePort, startRedisServer } from '../../test/support/redis.js';
import type { Roles } from '../lib/members.js';
import { customMember, processGroupPids } from '../lib/members.js';
import type { LoadGroup } from '../lib/report.js';
import { HELLO } from '../lib/requests.js';
import type { Baseline } from '../lib/subjects.js';
import { readyz, resource, spawnWorker, startBaseline, stopGroup, until } from '../lib/subjects.js';

/** The status of a GET, its body read and dropped; 0 when the connection fails. */
async function status(url: string): Promise<number> {
  try {
    const res = await request(url);
    await res.body.dump();
    return res.statusCode;
  } catch {
    return 0;
  }
}

interface TwoNodes {
  /** nginx in front of node A only (the worker's node): served locally. */
  local: string;
  /** nginx in front of node B only: every request crosses to node A. */
  cross: string;
  /** The same two paths without an engine: nginx in front of baseline (2), and of (4) relaying over TCP. */
  bareLocal: string;
  bareCross: string;
  baselines: Baseline[];
  redis: RedisServer;
  nodes: EngineHandle[];
  worker: ManagedProcess;
  nginx: ManagedProcess;
}

async function startTwoNodes(): Promise<TwoNodes> {
  const binary = nginxBinary();
  const redis = await startRedisServer();
  const name = `bench${Math.random().toString(36).slice(2, 8)}`;
  const cluster = (nodeId: string) => ({ processes: 1, redis_url: redis.url, secret: 'bench-secret', name, node_id: nodeId, advertise_host: '127.0.0.1' });
  const nodeA = await startEngine({ cluster: cluster('node-a'), logLevel: 'warn' });
  const nodeB = await startEngine({ cluster: cluster('node-b'), logLevel: 'warn' });
  const worker = spawnWorker(nodeA, { script: 'raw-worker.mjs' });
  await worker.stdout.waitFor((l) => l === 'registered', 20_000, 'raw worker registered');
  await until('worker on node A', 5000, async () => ((await readyz(nodeA)).connectedWorkers >= 1 ? true : undefined));
  for (const node of [nodeA, nodeB]) {
    await until(`/bench/hello on ${node.httpUrl}`, 10_000, async () => ((await status(`${node.httpUrl}${HELLO.path}`)) === 200 ? true : undefined));
  }
  // The bare pair: (2) is the local path with nothing but the hop to the worker; (4) with RELAY_TCP
  // adds one process that relays every request over a TCP connection on loopback to a process like
  // (2), as node B does to node A. Their ratio is what the extra hop costs with no engine at all.
  const baselines = [await startBaseline('2-ws-worker.mjs'), await startBaseline('4-relay.mjs', { RELAY_TCP: '1' })];
  const [bareLocalOrigin, bareCrossOrigin] = baselines.map((b) => new URL(b.origin).host);
  const [localPort, crossPort, bareLocalPort, bareCrossPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-nginx-'));
  const server = (port: number, upstream: string): string =>
    `server { listen 127.0.0.1:${port}; location / { proxy_pass http://${upstream}; proxy_http_version 1.1; proxy_set_header Connection ""; } }`;
  writeFileSync(
    join(dir, 'nginx.conf'),
    [
      'user root;',
      'worker_processes 1;',
      'daemon off;',
      `pid ${join(dir, 'nginx.pid')};`,
      `error_log ${join(dir, 'error.log')} warn;`,
      'events { worker_connections 4096; }',
      'http {',
      '  access_log off;',
      `  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fastcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;`,
      `  upstream node_a { server ${new URL(nodeA.httpUrl).host}; keepalive 128; }`,
      `  upstream node_b { server ${new URL(nodeB.httpUrl).host}; keepalive 128; }`,
      `  upstream bare_local { server ${bareLocalOrigin}; keepalive 128; }`,
      `  upstream bare_cross { server ${bareCrossOrigin}; keepalive 128; }`,
      `  ${server(localPort, 'node_a')}`,
      `  ${server(crossPort, 'node_b')}`,
      `  ${server(bareLocalPort, 'bare_local')}`,
      `  ${server(bareCrossPort, 'bare_cross')}`,
      '}',
    ].join('\n'),
  );
  const nginx = spawnManaged(binary, ['-p', dir, '-c', join(dir, 'nginx.conf')], process.env, ROOT, true);
  void nginx.exited.then(() => rmSync(dir, { recursive: true, force: true }));
  const local = `http://127.0.0.1:${localPort}`;
  const cross = `http://127.0.0.1:${crossPort}`;
  const bareLocal = `http://127.0.0.1:${bareLocalPort}`;
  const bareCross = `http://127.0.0.1:${bareCrossPort}`;
  for (const origin of [local, cross, bareLocal, bareCross]) {
    await until(`nginx at ${origin}`, 10_000, async () => {
      return (await status(`${origin}${HELLO.path}`)) === 200 ? true : undefined;
    });
  }
  return { local, cross, bareLocal, bareCross, baselines, redis, nodes: [nodeA, nodeB], worker, nginx };
}

async function stopTwoNodes(setup: TwoNodes): Promise<void> {
  await stopGroup(setup.nginx);
  await stopProcess(setup.worker, 'SIGTERM', 3000);
  await Promise.all(setup.nodes.map((node) => node.stop()));
  await Promise.all(setup.baselines.map((baseline) => baseline.stop()));
  await setup.redis.stop();
}

/**
 * Server-side CPU: nginx and both nodes (each a process group); the worker apart. Each is also priced
 * on its own (the row's note): where a crossing's CPU goes, against the bare pair's processes.
 */
function pidsOf(setup: TwoNodes): { server: number[]; workers: number[]; rss: number[]; roles: Roles } {
  const [nodeA, nodeB] = setup.nodes.map((node) => processGroupPids(node.child.pid as number).server) as [number[], number[]];
  const nginx = processGroupPids(setup.nginx.child.pid as number).server;
  const worker = [setup.worker.child.pid as number];
  return { server: [...nginx, ...nodeA, ...nodeB], workers: worker, rss: [...nodeA, ...nodeB], roles: { nginx, 'node B': nodeB, 'node A': nodeA, worker } };
}

/** Server-side CPU of a bare path: nginx and the baseline's process group; its worker apart. */
function barePidsOf(which: 0 | 1): (setup: TwoNodes) => { server: number[]; workers: number[]; rss: number[]; roles: Roles } {
  return (setup) => {
    const lead = (setup.baselines[which] as Baseline).pid;
    const baseline = processGroupPids(lead);
    const nginx = processGroupPids(setup.nginx.child.pid as number).server;
    // (2) is one process; (4) is the process serving HTTP and, forked from it, the one that owns the worker.
    const roles: Roles = which === 0 ? { nginx, '(2)': baseline.server } : { nginx, '(4)': [lead], owner: baseline.server.filter((pid) => pid !== lead) };
    return { server: [...nginx, ...baseline.server], workers: baseline.workers, rss: baseline.server, roles: { ...roles, worker: baseline.workers } };
  };
}

/**
 * Two Redis-mode nodes on this machine behind a real nginx (Debian package), the worker on node A:
 * requests through nginx to node B cross to node A over the TCP forward link; requests through nginx
 * to node A are served where the worker is. Target: crossing ≥ 0.85 × local. The same two paths
 * without an engine (nginx → (2), nginx → (4) over TCP → its owner) are measured in the same
 * alternation: the info row says what the extra hop costs any engine of this design on this machine.
 */
export function twoNodesNginx(): LoadGroup {
  const setup = resource(startTwoNodes, stopTwoNodes);
  return {
    kind: 'load',
    name: 'two nodes behind nginx',
    resources: [setup],
    members: {
      local: customMember('nginx → node A (the worker\'s node)', setup, HELLO, (s) => s.local, pidsOf),
      cross: customMember('nginx → node B → forwarded to node A', setup, HELLO, (s) => s.cross, pidsOf),
      bareLocal: { ...customMember('nginx → (2)', setup, HELLO, (s) => s.bareLocal, barePidsOf(0)), engine: false },
      bareCross: { ...customMember('nginx → (4) relay over TCP → owner as (2)', setup, HELLO, (s) => s.bareCross, barePidsOf(1)), engine: false },
    },
    order: ['local', 'cross', 'bareLocal', 'bareCross'],
    rows: [
      { name: 'nodes 2 (Redis mode) behind nginx, worker on node A: requests through node B against through node A', scenario: 'cross', baseline: 'local', target: 0.85, rolesNote: true },
      { name: 'info: the same hop without an engine, behind nginx: (4) relaying over TCP against (2)', scenario: 'bareCross', baseline: 'bareLocal', rolesNote: true },
      { name: 'info: behind nginx, Switchyard through node A against (2)', scenario: 'local', baseline: 'bareLocal' },
    ],
  };
}
