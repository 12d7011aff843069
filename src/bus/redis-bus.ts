import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { SwitchyardError } from '../errors.js';
import type { WireSnapshot } from './wire-snapshot.js';
import type { Bus, BusHandlers } from './bus.js';
import { createRedisConnection, quitConnection, redactRedisUrl, withDeadline } from './redis-connection.js';
import { RedisKeyspace } from './redis-keyspace.js';
import { RedisPeerStore } from './redis-peer-store.js';
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
 * Distributed mode (docs/cluster.md#the-bus): each peer's snapshot lives in a key under a lease and is
 * announced on one pub/sub channel; heartbeats refresh the lease and carry the version, so a missed
 * announcement is fetched; every (re)subscribe reloads all peer keys. Two connections (commands,
 * subscriber). While disconnected the bus keeps what it knows and purges no one.
 */
export class RedisBus implements Bus {
  private readonly keys: RedisKeyspace;
  private readonly store: RedisPeerStore;
  private readonly log: Logger;
  private readonly throttle: WarnThrottle;
  private cmd: Redis | undefined;
  private sub: Redis | undefined;
  private view: RedisPeerView | undefined;
  private state: 'idle' | 'starting' | 'started' | 'closed' = 'idle';
  /** A full reload succeeded on the current connections; cleared by any connection loss. */
  private loaded = false;
  /** Bumped on every connection loss: async work begun on an older connection is abandoned. */
  private generation = 0;
  private resyncing = false;
  /** Newest snapshot not yet written to Redis. */
  private pending: WireSnapshot | undefined;
  /** Newest snapshot Redis confirmed: the one the lease keeps alive and heartbeats announce. */
  private written: WireSnapshot | undefined;
  private flushing = false;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private pinging = false;
  private readonly fetching = new Set<string>();
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
  }

  observeRefusals(observer: (code: string) => void): void {
    this.refusals = observer;
  }

  get synced(): boolean {
    return this.state === 'started' && this.loaded && this.bothReady();
  }

  start(handlers: BusHandlers): Promise<void> {
    if (this.state !== 'idle') return Promise.reject(new SwitchyardError('BUS_STATE', 'RedisBus.start() may be called once'));
    this.state = 'starting';
    this.view = new RedisPeerView(this.options.peerId, this.options.leaseMs, handlers);
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
    const newest = this.pending ?? (ownKeyKept ? undefined : this.written);
    if (newest !== undefined) {
      if (newest === this.pending) this.pending = undefined;
      await this.write(newest).catch((err: unknown) => {
        this.pending ??= newest;
        throw err;
      });
      checkCurrent();
    }
    const snapshots = await this.store.loadAll(cmd, checkCurrent);
    const now = performance.now();
    for (const snapshot of snapshots) view.offer(snapshot, now);
    const missing = view.reconcile(new Set(snapshots.map((s) => s.ownerId)), ownKeyKept, now);
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

  private async write(snapshot: WireSnapshot): Promise<void> {
    await this.store.write(required(this.cmd), snapshot);
    if (this.written === undefined || snapshot.version >= this.written.version) this.written = snapshot;
  }

  private tick(): void {
    if (this.state === 'closed') return;
    if (!this.loaded) {
      this.resync(); // retries a reload that failed while both connections were up
      return;
    }
    this.scheduleFlush(); // retries a failed write
    this.proveLink();
    const written = this.written;
    if (written !== undefined) this.heartbeat(written).catch((err: unknown) => this.throttle.warn('heartbeat', { err }, 'redis heartbeat failed'));
  }

  private async heartbeat(written: WireSnapshot): Promise<void> {
    const cmd = required(this.cmd);
    if (!this.flushing && this.pending === undefined && !(await this.store.refreshLease(cmd))) {
      // Re-checked after the await: a flush begun meanwhile writes a newer snapshot itself.
      if (this.loaded && !this.flushing && this.pending === undefined && this.written !== undefined) {
        this.log.info({ version: this.written.version }, 'own peer key gone: republishing');
        await this.write(this.written);
      }
    }
    await this.store.heartbeat(cmd, written.version);
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
          const expired = this.view.sweep(sentAt, performance.now());
          if (expired.length > 0) this.log.info({ peers: expired, leaseMs: this.options.leaseMs }, 'peer lease expired: removed');
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

  private receive(channel: string, text: string): void {
    const view = this.view;
    if (channel !== this.keys.channel || view === undefined || this.state === 'closed') return;
    const decoded = this.keys.decode(text);
    if (!decoded.ok) {
      this.refusals?.(decoded.code);
      this.throttle.warn(`refused:${decoded.code}`, { code: decoded.code, reason: decoded.reason, bytes: text.length }, 'bus message refused');
      return;
    }
    const message = decoded.message;
    const now = performance.now();
    try {
      if (message.kind === 'snapshot') view.offer(message.snapshot, now);
      else if (message.kind === 'heartbeat' && view.heartbeat(message.peerId, message.version, now)) this.fetch(message.peerId);
      else if (message.kind === 'gone') view.gone(message.peerId, now);
      // hello and sync belong to the embedded bus
    } catch (err) {
      // A throwing handler must not unwind into ioredis's reply parser.
      this.log.error({ err, kind: message.kind }, 'bus handler failed');
    }
  }

  /** A heartbeat announced a version never received (a lost announcement): read that peer's key. */
  private fetch(peerId: string): void {
    const cmd = this.cmd;
    if (this.fetching.has(peerId) || cmd?.status !== 'ready') return;
    this.fetching.add(peerId);
    this.store
      .read(cmd, peerId)
      .then(
        (snapshot) => {
          if (snapshot !== undefined && this.state !== 'closed') this.view?.offer(snapshot, performance.now());
        },
        (err: unknown) => this.throttle.warn('fetch', { err, peerId }, 'redis peer key fetch failed'),
      )
      .finally(() => this.fetching.delete(peerId));
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

function required<T>(value: T | undefined): T {
  if (value === undefined) throw new SwitchyardError('BUS_STATE', 'RedisBus used before start()');
  return value;
}
