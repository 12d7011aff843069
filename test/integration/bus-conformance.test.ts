import { randomBytes } from 'node:crypto';
import pino from 'pino';
import type { Logger } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Bus, BusHandlers } from '../../src/bus/bus.js';
import { encodeBusMessage } from '../../src/bus/bus-messages.js';
import { IpcBus } from '../../src/bus/ipc-bus.js';
import type { MemoryLink } from '../support/memory-ipc.js';
import { memoryLink } from '../support/memory-ipc.js';
import { IpcRelay } from '../../src/bus/ipc-relay.js';
import { RedisBus } from '../../src/bus/redis-bus.js';
import { RedisKeyspace } from '../../src/bus/redis-keyspace.js';
import type { WireSnapshot } from '../../src/bus/wire-snapshot.js';
import { freePort, startRedisServer, startTcpProxy } from '../support/redis.js';
import type { RedisServer, TcpProxy } from '../support/redis.js';

// ---------------------------------------------------------------------------------------------------
// Test support: handler records, waits with deadlines, captured logs.

type Call = { kind: 'snapshot'; snapshot: WireSnapshot } | { kind: 'gone'; peerId: string };

/** Every handler call a bus made, in order, plus the view they add up to. */
class HandlerLog {
  readonly calls: Call[] = [];
  private readonly held = new Map<string, number>();
  readonly handlers: BusHandlers = {
    snapshot: (snapshot) => {
      this.calls.push({ kind: 'snapshot', snapshot });
      this.held.set(snapshot.ownerId, snapshot.version);
    },
    peerGone: (peerId) => {
      this.calls.push({ kind: 'gone', peerId });
      this.held.delete(peerId);
    },
  };

  version(peerId: string): number | undefined {
    return this.held.get(peerId);
  }

  peers(): string[] {
    return [...this.held.keys()].sort();
  }

  deliveries(peerId: string): number[] {
    return this.calls.flatMap((c) => (c.kind === 'snapshot' && c.snapshot.ownerId === peerId ? [c.snapshot.version] : []));
  }

  goneCount(peerId?: string): number {
    return this.calls.filter((c) => c.kind === 'gone' && (peerId === undefined || c.peerId === peerId)).length;
  }
}

async function waitFor(predicate: () => boolean, timeoutMs: number, what: string): Promise<number> {
  const startedAt = performance.now();
  while (!predicate()) {
    if (performance.now() - startedAt > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return performance.now() - startedAt;
}

/** Only for assertions about time passing (a non-event, a lease running out); callers say why. */
const elapse = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function captureLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, lines };
}

function snapshot(ownerId: string, version: number, functionId = `fn-${version}`): WireSnapshot {
  return { ownerId, version, functions: [{ id: functionId, workerId: 'w1' }], triggers: [] };
}

const randomId = (prefix: string): string => `${prefix}-${randomBytes(4).toString('hex')}`;

// ---------------------------------------------------------------------------------------------------
// The shared suite.

interface TestPeer {
  id: string;
  bus: Bus;
  log: HandlerLog;
}

interface TestCluster {
  /** A peer with its bus constructed, not started. */
  create(id?: string): TestPeer;
  /** The peer dies without close(): its process or host is gone. */
  kill(peer: TestPeer): void;
  dispose(): Promise<void>;
}

interface BusTraits {
  /** Upper bound for others to see a peer that died without close() as gone. */
  deadPeerGoneWithinMs: number;
  /** Whether a burst of publishes is coalesced into far fewer deliveries. */
  coalesces: boolean;
}

async function join(cluster: TestCluster, id?: string): Promise<TestPeer> {
  const peer = cluster.create(id);
  await peer.bus.start(peer.log.handlers);
  return peer;
}

/** Longer than the Redis bus's 5 ms coalescing window: publishes this far apart are sent one by one. */
const APART_MS = 50;
const DELIVERY_MS = 2_000;

export function busConformance(name: string, makeCluster: () => Promise<TestCluster>, traits: BusTraits): void {
  describe(`Bus conformance: ${name}`, () => {
    let cluster: TestCluster;
    beforeEach(async () => {
      cluster = await makeCluster();
    });
    afterEach(async () => {
      await cluster.dispose();
    });

    it('delivers a published snapshot to the other peers', async () => {
      const a = await join(cluster);
      const b = await join(cluster);
      const c = await join(cluster);
      expect(b.bus.synced).toBe(true);
      a.bus.publish(snapshot(a.id, 1, 'hello'));
      await waitFor(() => b.log.version(a.id) === 1 && c.log.version(a.id) === 1, DELIVERY_MS, 'b and c to receive a@1');
      const call = b.log.calls.find((x) => x.kind === 'snapshot');
      expect(call).toEqual({ kind: 'snapshot', snapshot: snapshot(a.id, 1, 'hello') });
    });

    it('replaces with newer versions and ignores older or equal ones', async () => {
      const a = await join(cluster);
      const b = await join(cluster);
      a.bus.publish(snapshot(a.id, 1));
      await waitFor(() => b.log.version(a.id) === 1, DELIVERY_MS, 'a@1');
      a.bus.publish(snapshot(a.id, 3));
      await waitFor(() => b.log.version(a.id) === 3, DELIVERY_MS, 'a@3');
      a.bus.publish(snapshot(a.id, 2, 'stale'));
      await elapse(APART_MS); // so the stale one is really sent, not coalesced away
      a.bus.publish(snapshot(a.id, 3, 'equal'));
      await elapse(APART_MS);
      a.bus.publish(snapshot(a.id, 4));
      await waitFor(() => b.log.version(a.id) === 4, DELIVERY_MS, 'a@4');
      expect(b.log.deliveries(a.id)).toEqual([1, 3, 4]);
    });

    it('gives a late joiner every existing snapshot before start() resolves', async () => {
      const a = await join(cluster);
      const b = await join(cluster);
      a.bus.publish(snapshot(a.id, 5));
      b.bus.publish(snapshot(b.id, 7));
      await waitFor(() => a.log.version(b.id) === 7 && b.log.version(a.id) === 5, DELIVERY_MS, 'a and b to see each other');
      const late = await join(cluster);
      expect(late.bus.synced).toBe(true);
      expect(late.log.version(a.id)).toBe(5);
      expect(late.log.version(b.id)).toBe(7);
    });

    it('delivers a snapshot published before start() once started', async () => {
      const a = await join(cluster);
      const b = cluster.create();
      b.bus.publish(snapshot(b.id, 2));
      await b.bus.start(b.log.handlers);
      await waitFor(() => a.log.version(b.id) === 2, DELIVERY_MS, 'a to receive b@2');
    });

    it('never delivers a peer its own snapshots', async () => {
      const a = await join(cluster);
      const b = await join(cluster);
      for (let v = 1; v <= 3; v++) {
        a.bus.publish(snapshot(a.id, v));
        await waitFor(() => b.log.version(a.id) === v, DELIVERY_MS, `a@${v} at b`);
      }
      const c = await join(cluster); // a's snapshot is also in whatever c loads at start
      b.bus.publish(snapshot(b.id, 1));
      await waitFor(() => a.log.version(b.id) === 1 && c.log.version(b.id) === 1, DELIVERY_MS, 'b@1 at a and c');
      expect(a.log.deliveries(a.id)).toEqual([]);
      expect(a.log.peers()).toEqual([b.id].sort());
    });

    it('reports a cleanly closed peer gone at once, and close() is idempotent', async () => {
      const a = await join(cluster);
      const b = await join(cluster);
      a.bus.publish(snapshot(a.id, 1));
      await waitFor(() => b.log.version(a.id) === 1, DELIVERY_MS, 'a@1');
      await Promise.all([a.bus.close(), a.bus.close()]);
      await a.bus.close();
      expect(a.bus.synced).toBe(false);
      // Well under the Redis lease used here (500 ms): this is the goodbye, not an expired lease.
      await waitFor(() => b.log.goneCount(a.id) === 1, 300, 'b to see a gone');
      a.bus.publish(snapshot(a.id, 2)); // after close: ignored, never throws
      expect(b.log.version(a.id)).toBeUndefined();
    });

    it('settles a pending start() when closed before it synced', async () => {
      await join(cluster);
      const a = cluster.create();
      const started = a.bus.start(a.log.handlers);
      await a.bus.close();
      await expect(started).rejects.toThrow(/closed/);
      expect(a.bus.synced).toBe(false);
    });

    it('reports a peer that died without close() gone', async () => {
      const a = await join(cluster);
      const b = await join(cluster);
      a.bus.publish(snapshot(a.id, 1));
      await waitFor(() => b.log.version(a.id) === 1, DELIVERY_MS, 'a@1');
      cluster.kill(a);
      await waitFor(() => b.log.goneCount(a.id) === 1, traits.deadPeerGoneWithinMs, 'b to see dead a gone');
      expect(b.log.goneCount()).toBe(1);
    });

    it('converges on the last version of a burst of 1000 publishes', async () => {
      const a = await join(cluster);
      const b = await join(cluster);
      // A reconnect storm: registrations arrive over many event-loop turns, not in one synchronous loop.
      for (let v = 1; v <= 1000; v++) {
        a.bus.publish(snapshot(a.id, v));
        if (v % 50 === 0) await new Promise((resolve) => setImmediate(resolve));
      }
      await waitFor(() => b.log.version(a.id) === 1000, 5_000, 'b to converge on a@1000');
      const delivered = b.log.deliveries(a.id);
      expect(delivered.at(-1)).toBe(1000);
      expect([...delivered].sort((x, y) => x - y)).toEqual(delivered); // never backwards
      if (traits.coalesces) expect(delivered.length).toBeLessThan(50);
    });
  });
}

// ---------------------------------------------------------------------------------------------------
// Embedded: IpcBus children connected by in-memory channels to one IpcRelay.

function ipcCluster(): Promise<TestCluster> {
  const clusterName = randomId('ipc');
  const logger = pino({ level: 'silent' });
  const relay = new IpcRelay(clusterName, logger);
  const links = new Map<TestPeer, MemoryLink>();
  const peers: TestPeer[] = [];
  return Promise.resolve({
    create: (id = randomId('peer')) => {
      const link = memoryLink();
      relay.attach(link.primary);
      const peer: TestPeer = { id, bus: new IpcBus(link.child, id, clusterName, logger), log: new HandlerLog() };
      links.set(peer, link);
      peers.push(peer);
      return peer;
    },
    kill: (peer) => {
      const link = links.get(peer);
      link?.sever();
      if (link !== undefined) relay.detach(link.primary);
    },
    dispose: async () => {
      await Promise.all(peers.map((p) => p.bus.close()));
    },
  });
}

busConformance('IpcBus via IpcRelay', ipcCluster, { deadPeerGoneWithinMs: 300, coalesces: false });

// ---------------------------------------------------------------------------------------------------
// Distributed: RedisBus instances against a real redis-server, each behind its own TCP proxy so a
// test can cut one peer's link (a dead host, or a receiver's own outage) while Redis stays up.

const HEARTBEAT_MS = 100;
const BUS_SECRET = 'bus-conformance-secret';
const LEASE_MS = 500;

let redis: RedisServer;

interface RedisTestCluster extends TestCluster {
  name: string;
  proxyOf(peer: TestPeer): TcpProxy;
  logsOf(peer: TestPeer): Record<string, unknown>[];
}

async function redisCluster(): Promise<RedisTestCluster> {
  const name = randomId('sy-test');
  const peers: TestPeer[] = [];
  const proxies = new Map<TestPeer, TcpProxy>();
  const logs = new Map<TestPeer, Record<string, unknown>[]>();
  const pendingProxies: Promise<TcpProxy>[] = [];
  // Proxies are started ahead, so create() stays synchronous like the IPC one.
  const spare: TcpProxy[] = [];
  const refill = async (): Promise<void> => {
    while (spare.length < 4) spare.push(await startTcpProxy(redis.port));
  };
  await refill();
  return {
    name,
    create: (id = randomId('peer')) => {
      const proxy = spare.pop();
      if (proxy === undefined) throw new Error('no spare proxy');
      pendingProxies.push(refill().then(() => proxy));
      const { logger, lines } = captureLogger();
      const bus = new RedisBus({ url: proxy.url, cluster: name, secret: BUS_SECRET, peerId: id, heartbeatMs: HEARTBEAT_MS, leaseMs: LEASE_MS, logger });
      const peer: TestPeer = { id, bus, log: new HandlerLog() };
      peers.push(peer);
      proxies.set(peer, proxy);
      logs.set(peer, lines);
      return peer;
    },
    kill: (peer) => proxies.get(peer)?.cut(),
    proxyOf: (peer) => {
      const proxy = proxies.get(peer);
      if (proxy === undefined) throw new Error('unknown peer');
      return proxy;
    },
    logsOf: (peer) => logs.get(peer) ?? [],
    dispose: async () => {
      await Promise.all(peers.map((p) => p.bus.close()));
      await Promise.all(pendingProxies);
      await Promise.all([...proxies.values(), ...spare].map((p) => p.close()));
    },
  };
}

describe('distributed (real redis-server)', () => {
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    if (redis !== undefined) await redis.stop();
  });

  busConformance('RedisBus', redisCluster, { deadPeerGoneWithinMs: LEASE_MS + 5 * HEARTBEAT_MS, coalesces: true });

  describe('RedisBus in distributed mode', () => {
    let cluster: RedisTestCluster;
    beforeEach(async () => {
      cluster = await redisCluster();
    });
    afterEach(async () => {
      await cluster.dispose();
    });

    const peerKey = (peer: TestPeer): string => `${cluster.name}:peer:${peer.id}`;
    const warnings = (peer: TestPeer): Record<string, unknown>[] => cluster.logsOf(peer).filter((l) => l.level === 40);

    it('keeps every live peer when Redis restarts empty, and they all republish', async () => {
      const peers = [await join(cluster), await join(cluster), await join(cluster)];
      for (const p of peers) p.bus.publish(snapshot(p.id, 1));
      await waitFor(() => peers.every((p) => p.log.peers().length === 2), DELIVERY_MS, 'everyone to see everyone');
      await redis.restart(); // --save "" and no AOF: it comes back empty
      await waitFor(() => peers.every((p) => p.bus.synced), 3_000, 'every bus back in sync');
      for (const p of peers) expect(await redis.command('EXISTS', peerKey(p))).toBe(':1');
      // Time passing is the point: a whole lease after the restart, no live peer may have been purged.
      await elapse(LEASE_MS + 3 * HEARTBEAT_MS);
      for (const p of peers) {
        expect(p.log.goneCount()).toBe(0);
        expect(p.log.peers()).toHaveLength(2);
      }
      peers[0]?.bus.publish(snapshot(peers[0].id, 2));
      await waitFor(() => peers.slice(1).every((p) => p.log.version(peers[0]?.id ?? '') === 2), DELIVERY_MS, 'a@2 after restart');
    });

    it('delivers a snapshot published while Redis was down once it is back', async () => {
      const a = await join(cluster);
      const b = await join(cluster);
      a.bus.publish(snapshot(a.id, 1));
      await waitFor(() => b.log.version(a.id) === 1, DELIVERY_MS, 'a@1');
      await redis.stop();
      await waitFor(() => !a.bus.synced && !b.bus.synced, DELIVERY_MS, 'both buses to notice the outage');
      a.bus.publish(snapshot(a.id, 2));
      a.bus.publish(snapshot(a.id, 3));
      await redis.restart();
      await waitFor(() => b.log.version(a.id) === 3, 3_000, 'b to receive a@3 after the outage');
      expect(b.log.deliveries(a.id)).toEqual([1, 3]);
      expect(b.log.goneCount()).toBe(0);
      // a@3 can reach b (its reload, or its subscriber) before a's own reload has finished: being back
      // in sync is a state each bus reaches shortly after, as in the restart case above, not at once.
      await waitFor(() => a.bus.synced && b.bus.synced, 3_000, 'both buses back in sync');
    });

    it('purges no one while its own connection is down longer than a lease, then catches up', async () => {
      const a = await join(cluster);
      const b = await join(cluster);
      const c = await join(cluster);
      a.bus.publish(snapshot(a.id, 1));
      c.bus.publish(snapshot(c.id, 1));
      await waitFor(() => b.log.peers().length === 2, DELIVERY_MS, 'b to hold a and c');
      cluster.proxyOf(b).cut();
      await waitFor(() => !b.bus.synced, DELIVERY_MS, 'b to notice its outage');
      await c.bus.close(); // b misses this goodbye
      a.bus.publish(snapshot(a.id, 2)); // and this announcement
      // Time passing is the point: b hears nobody for two leases and must still purge no one.
      await elapse(2 * LEASE_MS);
      expect(b.log.goneCount()).toBe(0);
      expect(b.log.peers()).toEqual([a.id, c.id].sort());
      cluster.proxyOf(b).restore();
      await waitFor(() => b.bus.synced && b.log.version(a.id) === 2, 3_000, 'b back in sync with a@2');
      await waitFor(() => b.log.goneCount(c.id) === 1, LEASE_MS + 5 * HEARTBEAT_MS, 'b to drop c, whose key is gone');
      expect(b.log.goneCount(a.id)).toBe(0);
    });

    it('drops a peer whose key vanished during a short outage as soon as it has reloaded', async () => {
      const a = await join(cluster);
      const b = await join(cluster);
      a.bus.publish(snapshot(a.id, 1));
      b.bus.publish(snapshot(b.id, 1));
      await waitFor(() => b.log.version(a.id) === 1 && a.log.version(b.id) === 1, DELIVERY_MS, 'a and b to see each other');
      cluster.proxyOf(b).cut();
      await waitFor(() => !b.bus.synced, DELIVERY_MS, 'b to notice its outage');
      await a.bus.close(); // b misses this goodbye; b's own key outlives the short outage
      cluster.proxyOf(b).restore();
      await waitFor(() => b.bus.synced, DELIVERY_MS, 'b back in sync');
      // Redis kept b's key, so it kept a's too had a been alive: the reload itself removes a.
      expect(b.log.goneCount(a.id)).toBe(1);
    });

    it('fetches the key when a heartbeat announces a version it missed', async () => {
      const a = await join(cluster);
      const b = await join(cluster);
      a.bus.publish(snapshot(a.id, 1));
      await waitFor(() => b.log.version(a.id) === 1, DELIVERY_MS, 'a@1');
      // A snapshot stored but never announced (the pub/sub message was lost), then a heartbeat for it.
      const envelope = (message: Parameters<typeof encodeBusMessage>[1]): string =>
        new RedisKeyspace(cluster.name, BUS_SECRET).seal(JSON.stringify(encodeBusMessage(cluster.name, message)));
      await redis.command('SET', peerKey(a), envelope({ kind: 'snapshot', snapshot: snapshot(a.id, 9) }), 'PX', '60000');
      await redis.command('PUBLISH', `${cluster.name}:bus`, envelope({ kind: 'heartbeat', peerId: a.id, version: 9 }));
      await waitFor(() => b.log.version(a.id) === 9, DELIVERY_MS, 'b to fetch a@9');
    });

    it('ignores messages of another cluster and malformed ones, warning once, and keeps working', async () => {
      const a = await join(cluster);
      const b = await join(cluster);
      const channel = `${cluster.name}:bus`;
      const sealed = new RedisKeyspace(cluster.name, BUS_SECRET);
      // Sealed afresh each time: the same sealed text twice would be refused as a replay (BUS_REPLAYED).
      const foreign = (): string => sealed.seal(JSON.stringify(encodeBusMessage('another-cluster', { kind: 'snapshot', snapshot: snapshot('intruder', 1) })));
      for (let i = 0; i < 5; i++) await redis.command('PUBLISH', channel, foreign());
      const malformed = ['not json', '{"v":1}', JSON.stringify({ v: 1, cluster: cluster.name, message: { kind: 'snapshot', snapshot: { ownerId: 'x' } } })];
      for (const text of malformed) await redis.command('PUBLISH', channel, sealed.seal(text));
      // A Redis writer without the secret: a well-formed snapshot, unsigned and signed with another secret.
      const forged = JSON.stringify(encodeBusMessage(cluster.name, { kind: 'snapshot', snapshot: snapshot('forger', 1) }));
      await redis.command('PUBLISH', channel, forged);
      await redis.command('PUBLISH', channel, new RedisKeyspace(cluster.name, 'not-the-secret').seal(forged));
      // Published after the bad ones on the same channel, so delivered after them.
      a.bus.publish(snapshot(a.id, 1));
      await waitFor(() => b.log.version(a.id) === 1, DELIVERY_MS, 'a@1 after the bad messages');
      expect(b.log.peers()).toEqual([a.id]);
      const refused = warnings(b).filter((l) => l.msg === 'bus message refused');
      expect(refused.map((l) => l.code).sort()).toEqual(['BUS_FOREIGN_CLUSTER', 'BUS_MALFORMED', 'BUS_UNAUTHENTICATED']);
      expect(b.bus.synced).toBe(true);
    });

    it('rejects start() when Redis cannot be reached in time, and closes cleanly', async () => {
      const port = await freePort(); // nothing listens there
      const { logger } = captureLogger();
      const bus = new RedisBus({ url: `redis://127.0.0.1:${port}`, cluster: randomId('sy-test'), secret: BUS_SECRET, peerId: 'p', heartbeatMs: 100, leaseMs: 500, logger, startTimeoutMs: 300 });
      await expect(bus.start(new HandlerLog().handlers)).rejects.toMatchObject({ code: 'BUS_UNAVAILABLE' });
      expect(bus.synced).toBe(false);
      await bus.close();
    });
  });
});
