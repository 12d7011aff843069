// Issue 28: mixed old/new nodes during an upgrade. A node of the previous build speaks Redis bus
// protocol 1 (a full snapshot on every change, a heartbeat every interval, liveness by silence, no `p`
// in the envelope). It is stood in for here by what such a node writes, sealed with the cluster
// secret. A protocol-2 node must name it (log + metric), serve its routes, and speak its way — full
// snapshots and a heartbeat every interval — while it lives, then go back to deltas once it is gone.
// A message of a newer protocol is refused by name.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisKeyspace } from '../../src/bus/redis-keyspace.js';
import { http } from '../support/http.js';
import { awaitLogLines, logLines, waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';
import type { RedisServer } from '../support/redis.js';
import { startRedisServer } from '../support/redis.js';

const SECRET = 'versions-secret';
const LEASE_MS = 1000;
const OLD = 'old-node/0/x1';

describe('mixed bus protocols (issue 28)', () => {
  let redis: RedisServer;
  let node: EngineHandle;
  let spy: Redis;
  let publisher: Redis;
  const captured: string[] = [];
  const name = `v${Math.random().toString(36).slice(2, 8)}`;
  const keyspace = new RedisKeyspace(name, SECRET);
  /** What a protocol-1 node writes: the version-1 envelope without `p`. */
  const old = (message: unknown, p?: number): string => keyspace.seal(JSON.stringify({ v: 1, ...(p === undefined ? {} : { p }), cluster: name, message }));
  const oldSnapshot = (version: number) => ({
    ownerId: OLD,
    version,
    functions: [{ id: 'old::fn', workerId: 'w' }],
    triggers: [{ id: 't', functionId: 'old::fn', workerId: 'w', registeredAt: Date.now(), seq: 1, type: 'http', http: { apiPath: '/old', httpMethod: 'GET' } }],
    endpoint: { nodeId: 'old-node', host: '127.0.0.1', port: 1 },
  });
  const routes = async (): Promise<string[]> => (await http(`${node.adminUrl}/routes`)).json<{ routes: { path: string }[] }>().routes.map((r) => r.path);
  const fromNode = (kind: string): string[] => captured.filter((t) => t.includes(`"kind":"${kind}"`) && !t.includes(OLD));

  beforeAll(async () => {
    redis = await startRedisServer();
    spy = new Redis(redis.url);
    publisher = new Redis(redis.url);
    await spy.subscribe(`${name}:bus`);
    spy.on('message', (_channel: string, text: string) => captured.push(text));
    node = await startEngine({
      cluster: { processes: 1, redis_url: redis.url, secret: SECRET, name, node_id: 'new-node', advertise_host: '127.0.0.1', heartbeat_ms: 200, lease_ms: LEASE_MS },
      logLevel: 'info',
    });
  });
  afterAll(async () => {
    spy?.disconnect();
    publisher?.disconnect();
    await node?.stop();
    await redis?.stop();
  });

  it('names a protocol-1 peer, serves its routes, speaks its way while it lives, and returns to deltas after', async () => {
    const worker = await RawWorker.connect(node.workerUrl);
    worker.send({ type: 'registerfunction', id: 'new::fn' });
    worker.send({ type: 'registertrigger', id: 'n1', trigger_type: 'http', function_id: 'new::fn', config: { api_path: '/new/1', http_method: 'GET' } });
    await worker.sync();
    // Alone, the node sends deltas and no heartbeat per interval.
    await waitUntil(() => fromNode('delta').some((t) => t.includes('/new/1')), 5000, 'a delta carrying /new/1');

    // The old node joins as it would: its key, its snapshot, then a heartbeat every 200 ms.
    await publisher.set(`${name}:peer:${OLD}`, old({ kind: 'snapshot', snapshot: oldSnapshot(1) }), 'PX', LEASE_MS);
    await publisher.publish(`${name}:bus`, old({ kind: 'snapshot', snapshot: oldSnapshot(1) }));
    let beating = true;
    const heartbeats = (async () => {
      while (beating) {
        await publisher.publish(`${name}:bus`, old({ kind: 'heartbeat', peerId: OLD, version: 1 }));
        await publisher.pexpire(`${name}:peer:${OLD}`, LEASE_MS);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();
    try {
      const named = await awaitLogLines(node, (l) => l.peerId === OLD && String(l.msg).startsWith('peer speaks bus protocol 1'), 1);
      expect(named[0]).toMatchObject({ code: 'BUS_VERSION', protocol: 1 });
      await waitUntil(async () => (await routes()).includes('/old'), 5000, "the old node's route in the table");
      const metrics = (await http(`${node.adminUrl}/metrics`)).text;
      expect(metrics).toContain(`switchyard_bus_legacy_peers_total{peer="${OLD}"} 1`);

      // While it lives: a change goes out as a full snapshot (what it can read), and heartbeats every interval.
      const snapshotsBefore = fromNode('snapshot').length;
      const heartbeatsBefore = fromNode('heartbeat').length;
      worker.send({ type: 'registertrigger', id: 'n2', trigger_type: 'http', function_id: 'new::fn', config: { api_path: '/new/2', http_method: 'GET' } });
      await worker.sync();
      await waitUntil(() => fromNode('snapshot').slice(snapshotsBefore).some((t) => t.includes('/new/2')), 5000, 'a full snapshot carrying /new/2');
      expect(fromNode('delta').some((t) => t.includes('/new/2'))).toBe(false);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect(fromNode('heartbeat').length - heartbeatsBefore).toBeGreaterThanOrEqual(3);
    } finally {
      beating = false;
      await heartbeats;
    }

    // Silent for a lease (its key lapses too): removed, and the node sends deltas again.
    await waitUntil(async () => !(await routes()).includes('/old'), 5 * LEASE_MS, 'the old node removed after its lease');
    await awaitLogLines(node, (l) => l.msg === 'no peer of bus protocol 1 left: publishing deltas again', 1);
    worker.send({ type: 'registertrigger', id: 'n3', trigger_type: 'http', function_id: 'new::fn', config: { api_path: '/new/3', http_method: 'GET' } });
    await worker.sync();
    await waitUntil(() => fromNode('delta').some((t) => t.includes('/new/3')), 5000, 'a delta carrying /new/3');
    await worker.close();
  });

  it('refuses a message of a newer protocol by name, and counts it', async () => {
    const future = 'future-node/0/x9';
    await publisher.publish(`${name}:bus`, old({ kind: 'heartbeat', peerId: future, version: 1 }, 3));
    const refused = await awaitLogLines(node, (l) => l.peerId === future && l.code === 'BUS_VERSION', 1);
    expect(refused[0]?.reason).toBe('peer speaks bus protocol 3, this node 2');
    expect((await http(`${node.adminUrl}/metrics`)).text).toMatch(/switchyard_bus_refused_total\{reason="version"\} [1-9]/);
    expect(logLines(node, (l) => l.peerId === future && String(l.msg).startsWith('peer speaks bus protocol 1'))).toEqual([]);
  });
});
