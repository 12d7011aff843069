import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { SwitchyardError } from '../errors.js';
import type { WireSnapshot } from './wire-snapshot.js';
import type { WireDelta } from './wire-delta.js';
import { diffSnapshots } from './wire-delta.js';
import { PeerChainReceiver } from './peer-chain.js';
import type { Bus, BusHandlers } from './bus.js';
import { createRedisConnection, quitConnection, redactRedisUrl, withDeadline } from './redis-connection.js';
import { RedisKeyspace } from './redis-keyspace.js';
import { RedisPeerStore, versionReason } from './redis-peer-store.js';
import { REDIS_BUS_PROTOCOL } from './bus-messages.js';
import { RedisPeerView } from './redis-peer-view.js';
import { WarnThrottle } from '../observability/warn-throttle.js';

export interface RedisBusOptions {
  url: string;
  /** Key and channel prefix; also the cluster name every message is checked against. */
  cluster: string;
  /** The cluster secret: everything written to Redis is authenticated with it (redis-keyspace.ts). */
  secret: string;
  /** PEM of the CA that signed the Redis server certificate (rediss:// URLs). */
  tlsCa?: string;
  peerId: string;
  heartbeatMs: number;
  leaseMs: number;
  logger: Logger;
  /** How long start() waits for Redis and the initial load before it rejects (default 10 s). */
  startTimeoutMs?: number;
}

const START_TIMEOUT_MS = 10_000;
const GOODBYE_TIMEOUT_MS = 1_000;

type Connection = 'commands' | 'subscriber';

/**
 * Distributed mode (docs/cluster.md#the-bus, docs/scale.md): each peer's state lives in Redis as a
 * checkpoint and a log of deltas under a lease; each change is one delta on the pub/sub channel, applied
 * by receivers holding the version it follows, and a gap resyncs that peer from checkpoint and log.
 * Liveness is a sorted set refreshed every interval (O(peers) through Redis, nothing published); a
 * receiver repairs its own gaps (a failed read is retried every interval); every (re)subscribe reloads
 * every peer.
 * Two connections (commands, subscriber). While disconnected the bus keeps what it knows and purges no one.
 */
export class RedisBus implements Bus {
  private readonly keys: RedisKeyspace;
  private readonly store: RedisPeerStore;
  private readonly log: Logger;
  private readonly throttle: WarnThrottle;
  private cmd: Redis | undefined;
  private sub: Redis | undefined;
  private view: RedisPeerView | undefined;
  /** Each peer's version chain: deltas applied in order, gaps resynced (peer-chain.ts). */
  private readonly chains: PeerChainReceiver;
  /** The next write must be a full snapshot: nothing written yet, our key was lost, or a write failed midway. */
  private needFull = true;
  /**
   * Peers of the previous build (bus protocol 1: no deltas, liveness by a heartbeat every interval), by
   * when they were last heard. While any is live this node speaks their way too (docs/scale.md).
   */
  private readonly legacy = new Map<string, number>();
  /** Peers whose key was missing at a reload that could not tell a departure (our own key was lost too): checked again after a lease. */
  private readonly suspects = new Map<string, number>();
  private legacyObserver: ((peerId: string) => void) | undefined;
  private state: 'idle' | 'starting' | 'started' | 'closed' = 'idle';
  /** A full reload succeeded on the current connections; cleared by any connection loss. */
  private loaded = false;
  /** Bumped on every connection loss: async work begun on an older connection is abandoned. */
  private generation = 0;
  private resyncing = false;
  /** Newest snapshot not yet written to Redis. */
  private pending: WireSnapshot | undefined;
  /** Newest snapshot Redis confirmed: the one the lease keeps alive (and protocol 1's heartbeats carry). */
  private written: WireSnapshot | undefined;
  private flushing = false;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private pinging = false;
  private startWaiter: { resolve: () => void; reject: (error: Error) => void } | undefined;
  private closing: Promise<void> | undefined;
  private refusals: ((code: string) => void) | undefined;

  constructor(private readonly options: RedisBusOptions) {
    this.log = options.logger.child({ module: 'redis-bus', peerId: options.peerId });
    this.throttle = new WarnThrottle(this.log);
    this.keys = new RedisKeyspace(options.cluster, options.secret);
    this.store = new RedisPeerStore(this.keys, options.peerId, options.leaseMs, (key, reason, code) => {
      this.refusals?.(code);
      this.throttle.warn('refused:stored', { key, reason }, 'peer key refused');
    });
    this.chains = new PeerChainReceiver({
      selfId: options.peerId,
      offer: (snapshot) => this.view?.offer(snapshot, performance.now()),
      hasLeft: (peerId) => this.view?.hasLeft(peerId) === true,
      read: (peerId) => {
        const cmd = this.cmd;
        return cmd?.status === 'ready' ? this.store.read(cmd, peerId) : undefined;
      },
      legacy: (peerId) => this.markLegacy(peerId, performance.now()),
      closed: () => this.state === 'closed',
      log: this.log,
      warn: (key, fields, message) => this.throttle.warn(key, fields, message),
    });
  }

  observeRefusals(observer: (code: string) => void): void {
    this.refusals = observer;
  }

  /** Called with the id of each peer found speaking bus protocol 1 (metrics). */
  observeLegacyPeers(observer: (peerId: string) => void): void {
    this.legacyObserver = observer;
  }

  /** Snapshots delivered are built from each peer's chain of deltas: unchanged records are the same objects. */
  readonly recordsShared = true;

  get synced(): boolean {
    return this.state === 'started' && this.loaded && this.bothReady();
  }

  start(handlers: BusHandlers): Promise<void> {
    if (this.state !== 'idle') return Promise.reject(new SwitchyardError('BUS_STATE', 'RedisBus.start() may be called once'));
    this.state = 'starting';
    this.view = new RedisPeerView(this.options.peerId, this.options.leaseMs, {
      snapshot: (snapshot) => handlers.snapshot(snapshot),
      peerGone: (peerId) => {
        this.chains.drop(peerId);
        this.suspects.delete(peerId);
        this.forgetLegacy(peerId);
        handlers.peerGone(peerId);
      },
    });
    const started = new Promise<void>((resolve, reject) => {
      this.startWaiter = { resolve, reject };
    });
    const startTimeoutMs = this.options.startTimeoutMs ?? START_TIMEOUT_MS;
    const timer = setTimeout(() => {
      const url = redactRedisUrl(this.options.url);
      this.failStart(new SwitchyardError('BUS_UNAVAILABLE', `Redis at ${url} was not reachable within ${startTimeoutMs} ms`));
    }, startTimeoutMs);
    this.cmd = this.connect('commands');
    this.sub = this.connect('subscriber');
    this.sub.on('message', (channel: string, text: string) => this.receive(channel, text));
    this.heartbeatTimer = setInterval(() => this.tick(), this.options.heartbeatMs);
    return started.finally(() => clearTimeout(timer));
  }

  publish(snapshot: WireSnapshot): void {
    if (this.state === 'closed') return;
    this.pending = snapshot;
    this.scheduleFlush();
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private connect(name: Connection): Redis {
    const connection = createRedisConnection(this.options.url, name, this.options.heartbeatMs, this.options.tlsCa);
    connection.on('error', (err: Error) => this.throttle.warn(`connection:${name}`, { err, connection: name }, 'redis connection error'));
    connection.on('close', () => this.connectionLost(name));
    connection.on('ready', () => {
      this.throttle.reset(`connection:${name}`);
      this.resync();
    });
    connection.connect().catch(() => undefined); // retried by its retryStrategy until start's deadline
    return connection;
  }

  private bothReady(): boolean {
    return this.cmd?.status === 'ready' && this.sub?.status === 'ready';
  }

  private connectionLost(name: Connection): void {
    if (this.state === 'closed') return;
    this.generation++;
    if (this.loaded) this.log.warn({ connection: name }, 'redis connection lost: serving the last known table until it is back');
    this.loaded = false;
  }

  /** After any (re)connect: subscribe, rewrite our own state, reload every peer key. */
  private resync(): void {
    if (this.resyncing || this.state === 'closed' || this.loaded || !this.bothReady()) return;
    this.resyncing = true;
    const generation = this.generation;
    this.runResync(generation)
      .catch((err: unknown) => {
        if (this.state !== 'closed' && generation === this.generation) this.throttle.warn('resync', { err }, 'redis bus reload failed; retrying');
      })
      .finally(() => {
        this.resyncing = false;
        // A connection came back while this run was failing: its 'ready' was ignored, so run again.
        if (generation !== this.generation) this.resync();
      });
  }

  private async runResync(generation: number): Promise<void> {
    const cmd = required(this.cmd);
    const view = required(this.view);
    const checkCurrent = (): void => {
      if (generation !== this.generation || this.state === 'closed') throw new SwitchyardError('BUS_INTERRUPTED', 'redis connection changed');
    };
    await required(this.sub).subscribe(this.keys.channel);
    checkCurrent();
    // Our own key surviving the outage means Redis kept its data, so a missing peer key is a real
    // departure; when ours is gone too (restarted empty, or our lease lapsed) peers get a lease to republish.
    const ownKeyKept = this.written !== undefined && (await this.store.refreshLease(cmd));
    checkCurrent();
    if (!ownKeyKept) this.needFull = true;
    const newest = this.pending ?? (ownKeyKept ? undefined : this.written);
    if (newest !== undefined) {
      if (newest === this.pending) this.pending = undefined;
      await this.write(newest).catch((err: unknown) => {
        this.pending ??= newest;
        throw err;
      });
      checkCurrent();
    }
    const chains = await this.store.loadAll(cmd, checkCurrent);
    for (const chain of chains) this.chains.stored(chain);
    const now = performance.now();
    const missing = view.reconcile(new Set(chains.map((c) => c.peerId)), ownKeyKept, now);
    if (!ownKeyKept) for (const peerId of missing) this.suspects.set(peerId, now + this.options.leaseMs);
    if (missing.length > 0) this.log.info({ peers: missing, removed: ownKeyKept }, 'peer keys missing after reload');
    this.loaded = true;
    this.log.info({ peers: view.size }, 'redis bus in sync');
    if (this.state === 'starting') {
      this.state = 'started';
      this.startWaiter?.resolve();
      this.startWaiter = undefined;
    }
    this.scheduleFlush();
  }

  /**
   * Writes the newest pending snapshot now, one write at a time: publishes are already coalesced by
   * the membership (cluster/membership.ts), so a second timer here would only add latency.
   */
  private scheduleFlush(): void {
    if (this.flushing || this.pending === undefined || !this.loaded) return;
    this.flush();
  }

  private flush(): void {
    const snapshot = this.pending;
    if (snapshot === undefined || !this.loaded || this.state === 'closed') return;
    this.pending = undefined;
    this.flushing = true;
    this.write(snapshot).then(
      () => {
        this.flushing = false;
        this.scheduleFlush();
      },
      (err: unknown) => {
        this.flushing = false;
        // Kept for the next 'ready' or heartbeat, unless a newer one arrived meanwhile.
        this.pending ??= snapshot;
        this.throttle.warn('write', { err }, 'redis snapshot write failed; will retry');
      },
    );
  }

  /**
   * The change from what Redis holds to `snapshot`, as a delta (or a full snapshot when nothing is held,
   * our state was lost, or the records cannot be diffed). A change that changes nothing is not sent.
   */
  private async write(snapshot: WireSnapshot): Promise<void> {
    const cmd = required(this.cmd);
    const written = this.written;
    // Peers of protocol 1 read only full snapshots: while one is live, every change is one.
    const full = this.needFull || this.legacy.size > 0 || written === undefined || snapshot.version <= written.version;
    const delta = full ? undefined : diffSnapshots(written, snapshot);
    try {
      if (delta === undefined) {
        await this.store.writeFull(cmd, snapshot);
      } else {
        if (isEmpty(delta)) return;
        await this.store.writeDelta(cmd, delta, snapshot);
      }
    } catch (err) {
      // Whether the MULTI ran is unknown: the next write starts a new chain from a full snapshot.
      this.needFull = true;
      throw err;
    }
    // Only a full write rebuilds the checkpoint: a need found while a delta was in flight stays.
    if (delta === undefined) this.needFull = false;
    this.written = snapshot;
  }

  private tick(): void {
    if (this.state === 'closed') return;
    if (!this.loaded) {
      this.resync(); // retries a reload that failed while both connections were up
      return;
    }
    this.scheduleFlush(); // retries a failed write
    this.chains.retry(); // reads again a peer whose resync read failed
    this.proveLink();
    const written = this.written;
    if (written !== undefined) this.heartbeat(written).catch((err: unknown) => this.throttle.warn('heartbeat', { err }, 'redis heartbeat failed'));
  }

  private async heartbeat(written: WireSnapshot): Promise<void> {
    const cmd = required(this.cmd);
    // The lease is refreshed every interval, also while a write is in flight or waiting: a delta only
    // appends to the log, so a peer whose changes never stop (a write always under way when the
    // interval comes) would otherwise let its checkpoint lapse and be removed by every other node.
    if (!(await this.store.refreshLease(cmd)) && this.loaded && this.written !== undefined) {
      // Our checkpoint is gone: the next write must rebuild it (a delta in flight does not).
      this.needFull = true;
      // Re-checked after the await: a flush begun meanwhile writes the newer snapshot in full itself.
      if (!this.flushing && this.pending === undefined) {
        this.log.info({ version: this.written.version }, 'own peer key gone: republishing');
        await this.write(this.written);
      }
    }
    // Peers of protocol 1 judge liveness by silence: while one is live, a heartbeat every interval.
    // Otherwise nothing is published: a delta reaches every subscriber or its connection drops (which
    // reloads), a failed write is followed by a full snapshot, and receivers retry their own resyncs.
    if (this.legacy.size > 0 && !this.flushing && this.pending === undefined) await this.store.heartbeat(cmd, written.version);
  }

  /**
   * PING on the subscriber connection: its reply comes after every message Redis queued for us before
   * it, so a peer silent for a lease before the PING was sent is really silent, not hidden by a broken
   * link of ours. Only then does the sweep remove it.
   */
  private proveLink(): void {
    const sub = this.sub;
    if (this.pinging || sub === undefined) return;
    this.pinging = true;
    const sentAt = performance.now();
    const generation = this.generation;
    sub
      .ping()
      .then(
        () => {
          if (generation !== this.generation || !this.loaded || this.state === 'closed' || this.view === undefined) return;
          // Forgets peers that left long ago; only peers of protocol 1 are removed for silence.
          this.view.sweep(Number.NEGATIVE_INFINITY, performance.now());
          for (const [peerId, heardMs] of this.legacy) {
            if (heardMs + this.options.leaseMs < sentAt && this.view.expire(peerId)) this.log.info({ peers: [peerId], leaseMs: this.options.leaseMs }, 'peer lease expired: removed');
          }
          this.expireLapsed(generation).catch((err: unknown) => this.throttle.warn('liveness', { err }, 'redis liveness check failed'));
        },
        (err: unknown) => {
          if (generation !== this.generation || this.state === 'closed') return;
          this.throttle.warn('ping', { err }, 'redis subscriber did not answer PING: reconnecting');
          if (sub.status === 'ready') sub.disconnect(true);
        },
      )
      .finally(() => {
        this.pinging = false;
      });
  }

  /**
   * Peers whose liveness score is older than a lease: removed when their checkpoint is gone too (the
   * lease lapsed). The score is only a hint; a peer whose key is still there is alive.
   */
  private async expireLapsed(generation: number): Promise<void> {
    const cmd = required(this.cmd);
    const now = performance.now();
    const due = [...this.suspects].filter(([, atMs]) => atMs <= now).map(([peerId]) => peerId);
    const candidates = [...new Set([...(await this.store.expired(cmd)), ...due])];
    for (const peerId of due) this.suspects.delete(peerId);
    const lapsed: string[] = [];
    for (const peerId of candidates) if (!(await this.store.present(cmd, peerId))) lapsed.push(peerId);
    if (generation !== this.generation || this.state === 'closed' || this.view === undefined) return;
    const removed = lapsed.filter((peerId) => this.view?.expire(peerId) === true);
    if (removed.length > 0) this.log.info({ peers: removed, leaseMs: this.options.leaseMs }, 'peer lease expired: removed');
    await this.store.forget(cmd, lapsed);
  }

  private receive(channel: string, text: string): void {
    const view = this.view;
    if (channel !== this.keys.channel || view === undefined || this.state === 'closed') return;
    const decoded = this.keys.decode(text);
    if (!decoded.ok) {
      this.refusals?.(decoded.code);
      if (decoded.code === 'BUS_VERSION') {
        this.throttle.warn(`refused:version:${decoded.peerId ?? '?'}`, { code: decoded.code, reason: decoded.reason, peerId: decoded.peerId }, 'bus message refused: peer speaks another bus protocol');
        return;
      }
      this.throttle.warn(`refused:${decoded.code}`, { code: decoded.code, reason: decoded.reason, bytes: text.length }, 'bus message refused');
      return;
    }
    const message = decoded.message;
    const now = performance.now();
    if (decoded.protocol > REDIS_BUS_PROTOCOL) {
      const peerId = message.kind === 'snapshot' ? message.snapshot.ownerId : message.kind === 'delta' ? message.delta.ownerId : message.kind === 'sync' ? '?' : message.peerId;
      this.refusals?.('BUS_VERSION');
      this.throttle.warn(`refused:version:${peerId}`, { code: 'BUS_VERSION', reason: versionReason(decoded.protocol), peerId }, 'bus message refused: peer speaks a newer bus protocol');
      return;
    }
    if (message.kind === 'snapshot' || message.kind === 'heartbeat') {
      const peerId = message.kind === 'snapshot' ? message.snapshot.ownerId : message.peerId;
      if (decoded.protocol < REDIS_BUS_PROTOCOL) this.markLegacy(peerId, now);
      else this.forgetLegacy(peerId);
    }
    try {
      if (message.kind === 'snapshot') this.chains.full(message.snapshot);
      else if (message.kind === 'delta') this.chains.delta(message.delta);
      else if (message.kind === 'heartbeat' && view.heartbeat(message.peerId, message.version, now)) this.chains.fetch(message.peerId);
      else if (message.kind === 'gone') view.gone(message.peerId, now);
      // hello and sync belong to the embedded bus
    } catch (err) {
      // A throwing handler must not unwind into ioredis's reply parser.
      this.log.error({ err, kind: message.kind }, 'bus handler failed');
    }
  }

  /** A peer of protocol 1 heard: named in the log (once per minute) and counted; this node speaks its way while it lives. */
  private markLegacy(peerId: string, nowMs: number): void {
    if (peerId === this.options.peerId || this.view?.hasLeft(peerId) === true) return;
    const known = this.legacy.has(peerId);
    this.legacy.set(peerId, nowMs);
    if (known) return;
    this.legacyObserver?.(peerId);
    this.throttle.warn(
      `legacy:${peerId}`,
      { code: 'BUS_VERSION', peerId, protocol: 1 },
      'peer speaks bus protocol 1 (a node of the previous build): publishing full snapshots and a heartbeat every interval while it is in the cluster',
    );
    // Its reload read only our checkpoint, not the deltas since: our whole state again, now.
    this.needFull = true;
    if (this.written !== undefined && this.pending === undefined) {
      this.pending = this.written;
      this.scheduleFlush();
    }
  }

  private forgetLegacy(peerId: string): void {
    if (this.legacy.delete(peerId) && this.legacy.size === 0) {
      this.log.info({ peerId }, 'no peer of bus protocol 1 left: publishing deltas again');
    }
  }

  private async shutdown(): Promise<void> {
    this.state = 'closed';
    this.loaded = false;
    clearInterval(this.heartbeatTimer);
    if (this.startWaiter !== undefined) {
      this.startWaiter.reject(new SwitchyardError('BUS_CLOSED', 'RedisBus closed before it started'));
      this.startWaiter = undefined;
    }
    const { cmd, sub } = this;
    if (cmd?.status === 'ready') {
      await withDeadline(this.store.goodbye(cmd), GOODBYE_TIMEOUT_MS).catch((err: unknown) => this.log.debug({ err }, 'goodbye not delivered'));
    }
    await Promise.all([cmd, sub].flatMap((connection) => (connection === undefined ? [] : [quitConnection(connection)])));
  }

  private failStart(error: Error): void {
    const waiter = this.startWaiter;
    if (waiter === undefined) return;
    this.startWaiter = undefined;
    void this.close();
    waiter.reject(error);
  }
}

function isEmpty(delta: WireDelta): boolean {
  return delta.endpoint === undefined && Object.keys(delta.set).length === 0 && Object.keys(delta.del).length === 0;
}

function required<T>(value: T | undefined): T {
  if (value === undefined) throw new SwitchyardError('BUS_STATE', 'RedisBus used before start()');
  return value;
}
