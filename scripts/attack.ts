// Every issue-23 attack at once against a two-node Redis-mode cluster, with legitimate traffic, for a
// bounded time (loopback only): `npm run attack -- --seconds 600` (default 20). Passes when every
// engine process stays up (same pids), none passes the RSS bound, and legitimate requests keep being
// answered 200. Prints one JSON report line; exits 1 on a failed check.
import { Redis } from 'ioredis';
import WebSocket from 'ws';
import { http } from '../test/support/http.js';
import type { EngineHandle } from '../test/support/processes.js';
import { startEngine } from '../test/support/processes.js';
import { childPids, isRunning, rssMb } from '../test/support/proc.js';
import { rawHttp } from '../test/support/raw-http.js';
import { RawWorker } from '../test/support/raw-worker.js';
import { freePort, startRedisServer } from '../test/support/redis.js';

const args = process.argv.slice(2);
const seconds = Number(args[args.indexOf('--seconds') + 1] ?? 20) || 20;
const RSS_BOUND_MB = Number(process.env.ATTACK_RSS_BOUND_MB ?? 400);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const redis = await startRedisServer();
  const name = `atk${Math.random().toString(36).slice(2, 7)}`;
  const cluster = { processes: 2, secret: 'attack-secret', name, advertise_host: '127.0.0.1', heartbeat_ms: 200, lease_ms: 1000, redis_url: redis.url };
  const tenantPorts = [await freePort(), await freePort()];
  const node = (i: number) =>
    startEngine({
      logLevel: 'warn',
      cluster: { ...cluster, node_id: `node-${i}` },
      modules: [
        { name: 'iii-worker-manager', config: { host: '127.0.0.1', port: tenantPorts[i], max_registrations: 50, rbac: { expose_functions: ['match("t::*")'] } } },
        { name: 'iii-http-functions', config: { security: { url_allowlist: ['*'], block_private_ips: true, require_https: false } } },
      ],
    });
  const nodes: EngineHandle[] = [await node(0), await node(1)];
  const pids = nodes.flatMap((n) => [n.child.pid as number, ...childPids(n.child.pid as number)]);
  const maxRss = new Map<number, number>(pids.map((p) => [p, 0]));
  const sampler = setInterval(() => {
    for (const pid of pids) if (isRunning(pid)) maxRss.set(pid, Math.max(maxRss.get(pid) ?? 0, rssMb(pid)));
  }, 1000);

  // Legitimate traffic: a worker on each node, requests to both nodes all along.
  const legit = await Promise.all(nodes.map(async (n, i) => {
    const w = await RawWorker.connect(n.workerUrl);
    w.route(`legit::${i}`, 'GET', `/legit/${i}`);
    w.serve(`legit::${i}`, () => ({ status_code: 200, body: { ok: i } }));
    await w.sync();
    return w;
  }));
  for (const n of nodes) for (const i of [0, 1]) {
    const deadline = Date.now() + 20_000;
    while ((await http(`${n.httpUrl}/legit/${i}`)).status !== 200) {
      if (Date.now() > deadline) throw new Error('legitimate routes not served before the attack');
      await sleep(100);
    }
  }
  const counts = { legitOk: 0, legitFailed: 0, attacks: {} as Record<string, number> };
  const count = (what: string) => (counts.attacks[what] = (counts.attacks[what] ?? 0) + 1);
  const end = Date.now() + seconds * 1000;
  const running = () => Date.now() < end;
  const loop = async (what: string, everyMs: number, body: () => Promise<void>) => {
    while (running()) {
      try {
        await body();
      } catch {
        /* an attack failing on its side is expected */
      }
      count(what);
      await sleep(everyMs);
    }
  };

  // Bus replay: capture what the nodes publish, republish it every 0.5 s.
  const spy = new Redis(redis.url);
  const captured: string[] = [];
  await spy.subscribe(`${name}:bus`);
  spy.on('message', (_c: string, text: string) => captured.length < 200 && captured.push(text));
  const publisher = new Redis(redis.url);

  const tenantUrl = (i: number) => `ws://127.0.0.1:${tenantPorts[i]}`;
  const smuggle = [
    'GET /legit/0 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\nPOST /legit/0 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n',
    'POST /legit/0 HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000000\r\n\r\nGET  /legit/0 HTTP/1.1\r\nHost: x\r\n\r\n',
    'POST /legit/0 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000\r\n',
    `GET /legit/0 HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 2000 }, (_, i) => `x-${i}: ${i}\r\n`).join('')}\r\n`,
    'GET /legit/0 HTTP/1.1\r\n\r\n',
  ];
  let legitRound = 0;
  await Promise.all([
    loop('legit', 20, async () => {
      const n = nodes[legitRound % 2] as EngineHandle;
      const res = await http(`${n.httpUrl}/legit/${++legitRound % 2}`).catch(() => ({ status: 0 }));
      if (res.status === 200) counts.legitOk++;
      else counts.legitFailed++;
    }),
    loop('framing', 50, async () => {
      for (const n of nodes) for (const text of smuggle) await rawHttp(n.httpUrl, text, 5000);
    }),
    loop('oversized-ids', 2000, async () => {
      for (const i of [0, 1]) {
        const w = await RawWorker.connect(tenantUrl(i));
        for (let k = 0; k < 4; k++) w.send({ type: 'registerfunction', id: `t::${k}::${'x'.repeat(4 * 1024 * 1024)}` });
        for (let k = 0; k < 50; k++) w.send({ type: 'registerfunction', id: `t::meta-${k}`, metadata: { blob: 'm'.repeat(200_000) } });
        w.route('engine::functions::list', 'GET', '/stolen');
        w.send({ type: 'registerfunction', id: 't::ssrf', invocation: { url: `http://[::ffff:7f00:1]:${nodes[0]?.ports.http}/`, method: 'POST' } });
        w.send({ type: 'ping' });
        await w.ofType('pong', 60_000);
        await w.close();
      }
    }),
    loop('bus-replay', 500, async () => {
      for (const text of captured.slice(0, 50)) await publisher.publish(`${name}:bus`, text);
    }),
    loop('channels', 1000, async () => {
      for (const i of [0, 1]) {
        const w = await RawWorker.connect(tenantUrl(i));
        const refs: { channel_id: string; access_key: string }[] = [];
        for (let k = 0; k < 70; k++) {
          const id = `ch-${k}`;
          w.send({ type: 'invokefunction', invocation_id: id, function_id: 'engine::channels::create', data: {} });
          const r = await w.next((f) => f.type === 'invocationresult' && f.invocation_id === id, 30_000);
          const created = r.result as { writer?: { channel_id: string; access_key: string } } | undefined;
          if (created?.writer !== undefined) refs.push(created.writer);
        }
        // 2 MB items into channels nobody reads (each refused: larger than the 1 MiB buffer).
        for (const ref of refs.slice(0, 20)) {
          const ws = new WebSocket(`${tenantUrl(i)}/ws/channels/${ref.channel_id}?key=${ref.access_key}&dir=write`);
          await new Promise<void>((resolve) => {
            ws.once('open', () => ws.send(Buffer.alloc(2 * 1024 * 1024), () => resolve()));
            ws.once('error', () => resolve());
            ws.once('close', () => resolve());
          });
          ws.terminate();
        }
        await w.close();
      }
    }),
  ]);
  clearInterval(sampler);
  spy.disconnect();
  publisher.disconnect();
  const alive = pids.filter((pid) => isRunning(pid));
  const sameChildren = nodes.every((n) => childPids(n.child.pid as number).every((pid) => pids.includes(pid)));
  const rss = Object.fromEntries([...maxRss].map(([pid, mb]) => [pid, Math.round(mb)]));
  const report = {
    seconds,
    processes: pids.length,
    alive: alive.length,
    sameChildren,
    rssBoundMb: RSS_BOUND_MB,
    maxRssMb: rss,
    legitOk: counts.legitOk,
    legitFailed: counts.legitFailed,
    attackRounds: counts.attacks,
  };
  const pass = alive.length === pids.length && sameChildren && Object.values(rss).every((mb) => mb < RSS_BOUND_MB) && counts.legitOk > 0 && counts.legitFailed === 0;
  process.stdout.write(`${JSON.stringify({ ...report, pass })}\n`);
  for (const w of legit) await w.close().catch(() => undefined);
  for (const n of nodes) await n.stop().catch(() => undefined);
  await redis.stop();
  process.exit(pass ? 0 : 1);
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(2);
});
