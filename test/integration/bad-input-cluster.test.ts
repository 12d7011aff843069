/**
 * Bad input on the cluster side (the reliability issue's cluster suite), over real engines in
 * distributed mode sharing a test redis-server: node A (forward listener on a known TCP port, a
 * worker serving /fx/hello) and node B of cluster X, node C of another cluster Y. Every test checks
 * the exact behaviour and that the cluster keeps serving: B still forwards to A on the connection it
 * already had, and A's child is the same process.
 *
 * Where each item is covered:
 * - Forward connections without the secret, with a wrong one, a wrong cluster or version, a call
 *   before the handshake, malformed msgpack, a frame over the limit, no hello at all: forward.test.ts
 *   "forward server" covers each against a ForwardServer in the test process (a fake invoker); here:
 *   the same and garbage bytes (an HTTP request, a TLS hello) against a real engine's TCP listener,
 *   before and after a good handshake, many at once, with the legitimate peer's forwards untouched.
 * - Another cluster's prefix in Redis: bus-conformance.test.ts "ignores messages of another cluster
 *   and malformed ones" (a RedisBus in the test process); here: a second cluster of real engines on
 *   the same Redis whose name extends the first one's, and another cluster's snapshot stored under
 *   this cluster's key prefix. (The config refuses a name holding ':', so one cluster's keys
 *   never match another's SCAN pattern.)
 * - Garbage and hostile snapshots on this cluster's channel and keys: bus-conformance.test.ts (bus
 *   level) and test/unit/snapshot-check.test.ts (the deep check); here: published with a raw ioredis
 *   client at running engines.
 */
import { RedisKeyspace } from '../../src/bus/redis-keyspace.js';
import { once } from 'node:events';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FrameDecoder, encodeFrame } from '../../src/forwarding/forward-frames.js';
import type { ServerMessage } from '../../src/forwarding/forward-messages.js';
import { FORWARD_PROTOCOL_VERSION, HELLO_FEATURES, decodeServerMessage, encodeCall, encodeHello } from '../../src/forwarding/forward-messages.js';
import { expectErrorEnvelope } from '../support/assertions.js';
import { http, waitForStatus } from '../support/http.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';
import type { RedisServer } from '../support/redis.js';
import { freePort, startRedisServer } from '../support/redis.js';
import { awaitLogLines, logLines, waitUntil } from '../support/logs.js';

const SECRET = 'cluster-secret';
const HEARTBEAT_MS = 200;
const LEASE_MS = 1000;

interface ChildStatus {
  pid: number;
  peerId: string;
  ready: boolean;
}

async function childOf(engine: EngineHandle): Promise<ChildStatus> {
  const res = await http(`${engine.adminUrl}/readyz`);
  expect(res.status).toBe(200);
  const child = res.json<{ children: ChildStatus[] }>().children[0];
  if (child === undefined) throw new Error('no child in /readyz');
  return child;
}

/** A connection to a forward listener driven by hand: what it sends, and the server's answers until it closes. */
async function rawForward(port: number): Promise<{ socket: Socket; messages: ServerMessage[]; closed: Promise<void> }> {
  const socket = connect({ host: '127.0.0.1', port });
  const messages: ServerMessage[] = [];
  const decoder = new FrameDecoder();
  socket.on('data', (chunk: Buffer) => decoder.push(chunk, (body) => messages.push(decodeServerMessage(body))));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`forward listener did not close the connection within 10 s; got ${JSON.stringify(messages)}`));
    }, 10_000);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  await once(socket, 'connect');
  return { socket, messages, closed };
}

const lengthHeader = (length: number): Buffer => {
  const header = Buffer.alloc(4);
  header.writeUInt32BE(length);
  return header;
};

describe('bad input on the cluster side', () => {
  let redis: RedisServer;
  let nameX: string;
  let nameY: string;
  let nodeA: EngineHandle;
  let nodeB: EngineHandle;
  let nodeC: EngineHandle;
  let childA: ChildStatus;
  let childB: ChildStatus;
  let forwardPortA: number;
  let publisher: Redis;
  const sockets: RawWorker[] = [];

  const clusterConfig = (name: string, nodeId: string, extra: Record<string, unknown> = {}) => ({
    processes: 1,
    redis_url: redis.url,
    secret: SECRET,
    name,
    node_id: nodeId,
    advertise_host: '127.0.0.1',
    heartbeat_ms: HEARTBEAT_MS,
    lease_ms: LEASE_MS,
    ...extra,
  });

  const serve = async (engine: EngineHandle, functionId: string, path: string, body: unknown): Promise<RawWorker> => {
    const w = await RawWorker.connect(engine.workerUrl);
    sockets.push(w);
    w.route(functionId, 'GET', path);
    w.serve(functionId, () => ({ status_code: 200, body }));
    await w.sync();
    return w;
  };

  /** B's forward connections to A that A accepted (B opens one and keeps it). */
  const acceptedFromB = (): number =>
    logLines(nodeA, (l) => l.msg === 'forward connection accepted' && l.peerId === childB.peerId).length;

  /**
   * The cluster still serves: B answers /fx/hello through A over the connection it already had, A's
   * child is the process it was, and both nodes are ready.
   */
  const expectClusterServing = async (): Promise<void> => {
    for (let i = 0; i < 3; i++) {
      const res = await http(`${nodeB.httpUrl}/fx/hello`);
      expect({ status: res.status, body: res.json() }).toEqual({ status: 200, body: { from: 'A' } });
    }
    expect(acceptedFromB()).toBe(1);
    expect(await childOf(nodeA)).toMatchObject({ pid: childA.pid, peerId: childA.peerId, ready: true });
    expect(await childOf(nodeB)).toMatchObject({ pid: childB.pid, peerId: childB.peerId, ready: true });
  };

  beforeAll(async () => {
    redis = await startRedisServer();
    nameX = `bx${Math.random().toString(36).slice(2, 8)}`;
    // Y's name extends X's. (A name cannot hold ':', the config refuses it, so no cluster's keys can
    // fall inside another's `<name>:peer:*` SCAN pattern.)
    nameY = `${nameX}-y`;
    // C first, so that its key is in Redis when A and B load the peer keys at start.
    nodeC = await startEngine({ cluster: clusterConfig(nameY, 'node-c') });
    await serve(nodeC, 'fy::hello', '/fx/hello', { from: 'C' });
    await serve(nodeC, 'fy::only', '/fy/only', { from: 'C' });
    forwardPortA = await freePort();
    nodeA = await startEngine({ cluster: clusterConfig(nameX, 'node-a', { forward_port: forwardPortA }) });
    nodeB = await startEngine({ cluster: clusterConfig(nameX, 'node-b') });
    childA = await childOf(nodeA);
    childB = await childOf(nodeB);
    await serve(nodeA, 'fx::hello', '/fx/hello', { from: 'A' });
    await waitForStatus(`${nodeB.httpUrl}/fx/hello`, (s) => s === 200);
    await awaitLogLines(nodeA, (l) => l.msg === 'forward connection accepted' && l.peerId === childB.peerId, 1);
    publisher = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await publisher.connect();
  });
  afterAll(async () => {
    publisher?.disconnect();
    await Promise.all(sockets.map((s) => s.close()));
    await nodeB?.stop();
    await nodeA?.stop();
    await nodeC?.stop();
    await redis?.stop();
  });

  describe('forward listener', () => {
    const hello = (overrides: { secret?: string; cluster?: string; version?: number; timestampMs?: number } = {}): Buffer =>
      encodeHello({ version: FORWARD_PROTOCOL_VERSION, cluster: nameX, secret: SECRET, peerId: 'raw-peer', ...overrides });
    const call = (): Buffer => encodeCall({ id: 1, functionId: 'fx::hello', data: {}, remainingMs: 1000, requestId: undefined, isVoid: false }, 1 << 20);
    const helloOk: ServerMessage = { kind: 'helloOk', version: FORWARD_PROTOCOL_VERSION, features: HELLO_FEATURES.binary };
    const reject = (reason: string): ServerMessage => ({ kind: 'reject', reason });

    it.each<[string, () => Buffer[], () => ServerMessage[]]>([
      ['a hello without the secret', () => [hello({ secret: '' })], () => [reject('wrong cluster secret')]],
      ['a hello with a wrong secret', () => [hello({ secret: 'guess' })], () => [reject('wrong cluster secret')]],
      ['a hello with no secret field', () => [encodeFrame([0, FORWARD_PROTOCOL_VERSION, nameX])], () => [reject('malformed hello')]],
      ['the secret with another cluster name', () => [hello({ cluster: nameY })], () => [reject(`wrong cluster name "${nameY}"`)]],
      // Version 1 sent the secret in clear; this build refuses it by name.
      ['a version-1 hello (the secret in clear)', () => [encodeFrame([0, 1, nameX, SECRET, 'raw-peer'])], () => [reject('unsupported protocol version 1 (this peer speaks 2)')]],
      ['another protocol version', () => [hello({ version: 3 })], () => [reject('unsupported protocol version 3 (this peer speaks 2)')]],
      ['a hello from a clock 10 minutes off', () => [hello({ timestampMs: Date.now() - 600_000 })], () => [reject('hello too old or from the future (check the clocks)')]],
      ['a call before the handshake', () => [call()], () => [reject('call before the handshake')]],
      ['malformed msgpack', () => [lengthHeader(3), Buffer.from([0xc1, 0xc1, 0xc1])], () => [reject('frame body is not valid msgpack')]],
      ['an HTTP request', () => [Buffer.from('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')], () => [reject('frame of 1195725856 bytes exceeds the limit of 4096')]],
      ['a TLS ClientHello', () => [Buffer.from('16030100c4010000c00303', 'hex')], () => [reject('frame of 369295616 bytes exceeds the limit of 4096')]],
      ['a frame header announcing 4 GiB', () => [lengthHeader(0xffffffff)], () => [reject('frame of 4294967295 bytes exceeds the limit of 4096')]],
      ['a frame of length zero', () => [lengthHeader(0)], () => [reject('frame with an empty body')]],
      ['a frame over the limit after the handshake', () => [hello(), lengthHeader(0xffffffff)], () => [helloOk, reject('frame of 4294967295 bytes exceeds the limit of 67108864')]],
      ['malformed msgpack after the handshake', () => [hello(), lengthHeader(2), Buffer.from([0xc1, 0xc1])], () => [helloOk, reject('frame body is not valid msgpack')]],
      ['a call of the wrong shape after the handshake', () => [hello(), encodeFrame([3, 'x'])], () => [helloOk, reject('malformed call')]],
      ['a binary call cut short after the handshake', () => [hello(), lengthHeader(3), Buffer.from([0x0a, 0, 0])], () => [helloOk, reject('malformed call')]],
      ['a second hello', () => [hello(), hello()], () => [helloOk, reject('second hello on a connection')]],
    ])('refuses and closes a connection sending %s; the peer keeps forwarding', async (_name, frames, expected) => {
      const refusedBefore = logLines(nodeA, (l) => l.msg === 'forward connection refused').length;
      const raw = await rawForward(forwardPortA);
      raw.socket.write(Buffer.concat(frames()));
      await raw.closed;
      expect(raw.messages).toEqual(expected());
      const refused = await awaitLogLines(nodeA, (l) => l.msg === 'forward connection refused', refusedBefore + 1);
      expect(refused).toHaveLength(refusedBefore + 1);
      const last = expected().at(-1) as { reason: string };
      expect(refused.at(-1)).toMatchObject({ level: 40, reason: last.reason, remote: expect.stringMatching(/^127\.0\.0\.1:\d+$/) });
      await expectClusterServing();
    });

    it('closes a connection that never says hello after 5 s', async () => {
      const raw = await rawForward(forwardPortA);
      const startedAt = Date.now();
      await raw.closed;
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(4900);
      expect(raw.messages).toEqual([reject('no handshake within 5000 ms')]);
      await expectClusterServing();
    });

    it('refuses 200 garbage connections opened at once and keeps serving', async () => {
      const refusedBefore = logLines(nodeA, (l) => l.msg === 'forward connection refused').length;
      const raws = await Promise.all(Array.from({ length: 200 }, () => rawForward(forwardPortA)));
      for (const [i, raw] of raws.entries()) raw.socket.write(i % 2 === 0 ? hello({ secret: `guess-${i}` }) : lengthHeader(0xffffffff));
      await Promise.all(raws.map((raw) => raw.closed));
      for (const [i, raw] of raws.entries()) {
        expect(raw.messages).toEqual([reject(i % 2 === 0 ? 'wrong cluster secret' : 'frame of 4294967295 bytes exceeds the limit of 4096')]);
      }
      await awaitLogLines(nodeA, (l) => l.msg === 'forward connection refused', refusedBefore + 200);
      await expectClusterServing();
    });
  });

  describe('Redis bus', () => {
    const channel = (): string => `${nameX}:bus`;
    // What peers write to Redis carries an HMAC of the cluster secret; `seal` signs as a peer would.
    const keyspace = new RedisKeyspace(nameX, SECRET);
    const seal = (text: string): string => keyspace.seal(text);
    const envelope = (message: unknown, cluster = nameX): string => seal(JSON.stringify({ v: 1, cluster, message }));
    const evilTrigger = (apiPath: unknown) => ({
      id: 't1',
      functionId: 'evil::fn',
      workerId: 'w',
      registeredAt: Date.now(),
      seq: 1,
      type: 'http',
      http: { apiPath, httpMethod: 'GET' },
    });
    /** A snapshot of a peer that does not exist, serving /evil from an address where nothing listens. */
    const evil = (fields: Record<string, unknown>) => ({
      ownerId: 'evil/0/x',
      version: 1,
      functions: [{ id: 'evil::fn', workerId: 'w' }],
      triggers: [evilTrigger('/evil')],
      endpoint: { nodeId: 'evil', host: '127.0.0.1', port: 1 },
      ...fields,
    });

    it("keeps two clusters on one Redis apart, even when one's name extends the other's", async () => {
      // Each cluster serves its own /fx/hello; Y's other route is nowhere in X, and X's new one nowhere in Y.
      expect((await http(`${nodeC.httpUrl}/fx/hello`)).json()).toEqual({ from: 'C' });
      expect((await http(`${nodeA.httpUrl}/fx/hello`)).json()).toEqual({ from: 'A' });
      await serve(nodeA, 'fx::only', '/fx/only', { from: 'A' });
      await waitForStatus(`${nodeB.httpUrl}/fx/only`, (s) => s === 200); // X's own propagation works meanwhile
      for (const node of [nodeA, nodeB]) expectErrorEnvelope(await http(`${node.httpUrl}/fy/only`), 404, 'NOT_FOUND');
      expectErrorEnvelope(await http(`${nodeC.httpUrl}/fx/only`), 404, 'NOT_FOUND');
      expect((await http(`${nodeC.httpUrl}/fy/only`)).json()).toEqual({ from: 'C' });

      type RoutesView = { routes: { path: string; function_id: string; owners: string[] }[] };
      const routesOf = async (node: EngineHandle) => (await http(`${node.adminUrl}/routes`)).json<RoutesView>().routes;
      const childC = await childOf(nodeC);
      for (const node of [nodeA, nodeB]) {
        const routes = await routesOf(node);
        expect(routes.map((r) => r.function_id).sort()).toEqual(['fx::hello', 'fx::only']);
        expect(routes.flatMap((r) => r.owners).every((owner) => owner === childA.peerId)).toBe(true);
      }
      expect((await routesOf(nodeC)).map((r) => r.function_id).sort()).toEqual(['fy::hello', 'fy::only']);

      // X's nodes never even read C's key: their SCAN pattern does not match it.
      for (const node of [nodeA, nodeB]) expect(logLines(node, (l) => l.msg === 'peer key refused')).toEqual([]);
      expect(await redis.command('EXISTS', `${nameY}:peer:${childC.peerId}`)).toBe(':1');
      await expectClusterServing();
    });

    it('refuses garbage and hostile messages published on the channel, logging a warning', async () => {
      const notEnvelope = 'not a bus envelope of this protocol version';
      const cases: [text: string, code: string, reason: string][] = [
        [seal('not json'), 'BUS_MALFORMED', 'not JSON'],
        [seal(''), 'BUS_MALFORMED', 'not JSON'],
        [seal('x'.repeat(1 << 20)), 'BUS_MALFORMED', 'not JSON'],
        [seal('[]'), 'BUS_MALFORMED', notEnvelope],
        [seal('null'), 'BUS_MALFORMED', notEnvelope],
        [seal(JSON.stringify({ v: 2, cluster: nameX, message: { kind: 'gone', peerId: childA.peerId } })), 'BUS_MALFORMED', notEnvelope],
        // A Redis writer without the secret: a goodbye for A and a route snapshot, unsigned or signed with a guess.
        [JSON.stringify({ v: 1, cluster: nameX, message: { kind: 'gone', peerId: childA.peerId } }), 'BUS_UNAUTHENTICATED', 'no valid HMAC of the cluster secret'],
        [new RedisKeyspace(nameX, 'a-guess').seal(JSON.stringify({ v: 1, cluster: nameX, message: { kind: 'snapshot', snapshot: evil({}) } })), 'BUS_UNAUTHENTICATED', 'no valid HMAC of the cluster secret'],
        [envelope({ kind: 'snapshot', snapshot: evil({}) }, 'another-cluster'), 'BUS_FOREIGN_CLUSTER', 'message for cluster "another-cluster"'],
        [envelope({ kind: 'unknown-kind' }), 'BUS_MALFORMED', 'malformed unknown-kind message'],
        [envelope({ kind: 'gone', peerId: 42 }), 'BUS_MALFORMED', 'malformed gone message'],
        [envelope({ kind: 'heartbeat', peerId: childA.peerId, version: 'x' }), 'BUS_MALFORMED', 'malformed heartbeat message'],
        [envelope({ kind: 'snapshot', snapshot: { ownerId: '', version: 1, functions: [], triggers: [] } }), 'BUS_MALFORMED', 'malformed snapshot message'],
        [envelope({ kind: 'snapshot', snapshot: evil({ functions: 'all' }) }), 'BUS_MALFORMED', 'malformed snapshot message'],
        // Well-formed envelopes whose snapshot fails the deep check (routes re-parsed, never trusted).
        // (An api_path without a leading slash is valid, as in iii: `users` is `/users`; a non-string one is not.)
        [envelope({ kind: 'snapshot', snapshot: evil({ triggers: [evilTrigger(42)] }) }), 'BUS_MALFORMED', 'malformed snapshot: http trigger needs config.api_path'],
        [envelope({ kind: 'snapshot', snapshot: evil({ triggers: [evilTrigger('/a/:x/:x')] }) }), 'BUS_MALFORMED', 'malformed snapshot: duplicate parameter "x" in api_path'],
        [envelope({ kind: 'snapshot', snapshot: evil({ triggers: [{ ...evilTrigger('/evil'), type: 'cron' }] }) }), 'BUS_MALFORMED', 'malformed snapshot: unknown trigger type "cron"'],
        [envelope({ kind: 'snapshot', snapshot: evil({ functions: [{ id: { toString: 1 } }] }) }), 'BUS_MALFORMED', 'malformed snapshot: function needs id and workerId'],
        [envelope({ kind: 'snapshot', snapshot: evil({ endpoint: { nodeId: 'evil', host: '127.0.0.1', port: 70_000 } }) }), 'BUS_MALFORMED', 'malformed snapshot: endpoint host/port invalid'],
      ];
      const refusedOn = (node: EngineHandle) => logLines(node, (l) => l.msg === 'bus message refused');
      const before = [refusedOn(nodeA).length, refusedOn(nodeB).length];
      // Two subscribers: A and B (C listens on its own cluster's channel).
      for (const [text] of cases) expect(await publisher.publish(channel(), text)).toBe(2);
      for (const [i, node] of [nodeA, nodeB].entries()) {
        const lines = (await awaitLogLines(node, (l) => l.msg === 'bus message refused', (before[i] as number) + cases.length)).slice(before[i]);
        expect(lines.map((l) => [l.code, l.reason])).toEqual(cases.map(([, code, reason]) => [code, reason]));
        // Repeats of a code within 10 s are throttled to debug; the first one is a warning.
        expect(lines.every((l) => l.level === 40 || l.level === 20)).toBe(true);
        expect(logLines(node, (l) => l.msg === 'bus message refused' && l.level === 40).length).toBeGreaterThan(0);
        expect(logLines(node, (l) => l.msg === 'peer snapshot refused')).toEqual([]);
      }
      for (const node of [nodeA, nodeB]) expectErrorEnvelope(await http(`${node.httpUrl}/evil`), 404, 'NOT_FOUND');
      await expectClusterServing();
    });

    it("refuses a malformed snapshot under a live peer's id without losing that peer's later snapshots", async () => {
      // Invalid (its route's api_path is not a string), but it claims A's id and a far-future version.
      const hostile = { ownerId: childA.peerId, version: 1e15, functions: [], triggers: [evilTrigger(42)] };
      const refusedBefore = logLines(nodeB, (l) => l.msg === 'bus message refused').length;
      expect(await publisher.publish(channel(), envelope({ kind: 'snapshot', snapshot: hostile }))).toBe(2);
      const refused = await awaitLogLines(nodeB, (l) => l.msg === 'bus message refused', refusedBefore + 1);
      expect(refused.at(-1)).toMatchObject({ code: 'BUS_MALFORMED', reason: 'malformed snapshot: http trigger needs config.api_path' });
      // A's routes are still served through B, and what A registers next still reaches B.
      await expectClusterServing();
      await serve(nodeA, 'fx::later', '/fx/later', { from: 'A' });
      const later = await waitForStatus(`${nodeB.httpUrl}/fx/later`, (s) => s === 200, {}, 5000);
      expect(later.json()).toEqual({ from: 'A' });
    });

    it("refuses garbage stored under this cluster's peer keys when the nodes reload them", async () => {
      const garbageKey = `${nameX}:peer:garbage`;
      const impostorKey = `${nameX}:peer:impostor`;
      const foreignKey = `${nameX}:peer:foreign`;
      // A well-formed snapshot, but of A, stored under another peer's key.
      const misfiled = envelope({ kind: 'snapshot', snapshot: { ...evil({}), ownerId: childA.peerId, version: 1e15 } });
      const unsignedKey = `${nameX}:peer:unsigned`;
      await publisher.set(garbageKey, seal('{"v":1,'), 'PX', 60_000);
      await publisher.set(unsignedKey, JSON.stringify({ v: 1, cluster: nameX, message: { kind: 'snapshot', snapshot: { ...evil({}), ownerId: 'unsigned' } } }), 'PX', 60_000);
      await publisher.set(impostorKey, misfiled, 'PX', 60_000);
      await publisher.set(foreignKey, envelope({ kind: 'snapshot', snapshot: { ...evil({}), ownerId: 'foreign' } }, 'another-cluster'), 'PX', 60_000);
      const ours = [garbageKey, impostorKey, foreignKey, unsignedKey];
      const inSync = (node: EngineHandle): number => logLines(node, (l) => l.msg === 'redis bus in sync').length;
      const syncedBefore = [inSync(nodeA), inSync(nodeB)];
      // Every subscriber connection dropped: each node reconnects and reloads every peer key.
      expect(await publisher.call('CLIENT', 'KILL', 'TYPE', 'pubsub')).toBe(3);
      for (const [i, node] of [nodeA, nodeB].entries()) {
        await awaitLogLines(node, (l) => l.msg === 'redis bus in sync', (syncedBefore[i] as number) + 1);
        const refused = await awaitLogLines(node, (l) => l.msg === 'peer key refused' && ours.includes(l.key as string), 4);
        expect(refused.map((l) => [l.key, l.reason]).sort()).toEqual(
          [
            [garbageKey, 'not JSON'],
            [impostorKey, 'the key does not hold that peer’s snapshot'],
            [foreignKey, 'message for cluster "another-cluster"'],
            [unsignedKey, 'no valid HMAC of the cluster secret'],
          ].sort(),
        );
        // One warning per reload; the other refusals of that reload are throttled to debug.
        expect(refused.filter((l) => l.level === 40)).toHaveLength(1);
      }
      await publisher.del(...ours);
      // Both nodes reloaded (their pub/sub links were killed): each is in sync again once its bus reloaded.
      for (const node of [nodeA, nodeB]) {
        await waitUntil(async () => (await http(`${node.adminUrl}/healthz`)).json().bus === 'in_sync', 5000, 'node bus in sync again');
      }
      await expectClusterServing();
      for (const node of [nodeA, nodeB]) expectErrorEnvelope(await http(`${node.httpUrl}/evil`), 404, 'NOT_FOUND');
    });
  });
});
