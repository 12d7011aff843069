import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { InvocationOutcome } from '../invocation/invoker.js';
import type { Due } from '../invocation/deadline-queue.js';
import { DeadlineQueue } from '../invocation/deadline-queue.js';
import { engineFailure } from '../invocation/invoker.js';
import type { ForwardTarget } from './forward-connection.js';
import { ForwardConnection } from './forward-connection.js';
import { encodeBinaryCall } from './forward-binary.js';
import { DEFAULT_MAX_FRAME_BYTES } from './forward-frames.js';
import { FORWARD_PROTOCOL_VERSION, encodeCall, encodeHello } from './forward-messages.js';

export type { ForwardTarget } from './forward-connection.js';

export type ForwardResult =
  /**
   * The call reached the peer (it may have failed there), or it is over for good: its deadline
   * passed, or the link dropped after it was written (it may have run). Do not try another owner.
   */
  | { dispatched: true; outcome: InvocationOutcome }
  /** It never reached a worker (no connection, refused handshake, worker gone from that peer). */
  | { dispatched: false; reason: string };

export interface ForwardClientOptions {
  secret: string;
  cluster: string;
  selfPeerId: string;
  logger: Logger;
  /** Bound on connect plus handshake; the call's own deadline still applies. */
  connectTimeoutMs?: number;
  maxFrameBytes?: number;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 2000;
// After a failed connect, calls fail fast (not dispatched) for this long, doubling up to the max, so
// a dead peer costs one attempt per interval rather than one per request.
const BACKOFF_MIN_MS = 50;
const BACKOFF_MAX_MS = 1000;
// Ids wrap long before msgpack needs 64-bit integers; 2^31 calls are never in flight at once.
const MAX_CALL_ID = 0x7fffffff;
// setTimeout's ceiling (about 24.8 days); a longer or infinite deadline is treated as this long.
const MAX_WAIT_MS = 0x7fffffff;

interface PendingCall extends Due {
  id: number;
  functionId: string;
  data: unknown;
  deadline: number;
  requestId: string | undefined;
  traceparent: string | undefined;
  baggage: string | undefined;
  metadata: unknown;
  channels: readonly string[] | undefined;
  resolve: (result: ForwardResult) => void;
  /** The connection it was written to; null while it waits for one. */
  connection: ForwardConnection | null;
}

interface WaitingFire {
  functionId: string;
  data: unknown;
  metadata: unknown;
}

const notDispatched = (reason: string): ForwardResult => ({ dispatched: false, reason });
const isCall = (item: PendingCall | WaitingFire): item is PendingCall => 'resolve' in item;

/**
 * Forwards invocations to one peer over one persistent, multiplexed connection: calls are matched to
 * results by id, any number in flight, answered in any order. Every call is settled exactly once: by
 * its result, its deadline, the connection going away, or close(). The protocol: forward-messages.ts.
 */
export class ForwardClient {
  private readonly pending = new Map<number, PendingCall>();
  private connection: ForwardConnection | null = null;
  /** Calls and fires made while the connection is being set up, sent in order once it is ready. */
  private waiting: (PendingCall | WaitingFire)[] = [];
  private lastId = 0;
  private backoffMs = 0;
  private retryAt = 0;
  private lastFailure = '';
  private closed = false;
  private closing: Promise<void> | undefined;
  private readonly logger: Logger;
  private readonly address: string;
  private readonly maxFrameBytes: number;
  private readonly hello: () => Buffer;
  /** One timer for every call's deadline (a call's own would cost a timer list per call: deadline-queue.ts). */
  private readonly deadlines = new DeadlineQueue<PendingCall>((call) => {
    const where = call.connection === null ? 'before the peer could be reached' : `by peer ${this.address}`;
    this.settle(call, { dispatched: true, outcome: engineFailure('TIMEOUT', `${call.functionId} was not answered in time ${where}`) });
  });

  constructor(
    private readonly target: ForwardTarget,
    private readonly options: ForwardClientOptions,
  ) {
    // Checked here because net.connect throws synchronously on a bad port, where no call could settle.
    const validPort = target.port !== undefined && Number.isInteger(target.port) && target.port > 0 && target.port < 65536;
    if (target.socketPath === undefined && (target.host === undefined || !validPort)) {
      throw new TypeError('a forward target needs a socketPath, or a host and a port in 1-65535');
    }
    if (options.secret.length === 0) throw new TypeError('the forward client needs a non-empty cluster secret');
    this.address = target.socketPath ?? `${target.host}:${target.port}`;
    this.logger = options.logger.child({ peer: this.address });
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    // One hello per connection (its nonce must be new); encoded once here too, so that a hello that
    // cannot be encoded (a huge peer id) fails the constructor.
    this.hello = () => encodeHello({ version: FORWARD_PROTOCOL_VERSION, cluster: options.cluster, secret: options.secret, peerId: options.selfPeerId });
    this.hello();
  }

  /** Calls in flight or waiting for the connection (for metrics and tests). */
  get pendingCount(): number {
    return this.pending.size;
  }

  invoke(
    functionId: string,
    data: unknown,
    options: { deadline: number; requestId?: string; traceparent?: string; baggage?: string; metadata?: unknown; channels?: readonly string[] },
  ): Promise<ForwardResult> {
    if (this.closed) return Promise.resolve(notDispatched('forward client is closed'));
    const now = performance.now();
    const remainingMs = Math.min(options.deadline - now, MAX_WAIT_MS);
    // Written so that a NaN deadline counts as passed rather than reaching the wire.
    if (!(remainingMs > 0)) {
      return Promise.resolve({ dispatched: true, outcome: engineFailure('TIMEOUT', `deadline passed before ${functionId} was forwarded`) });
    }
    return new Promise<ForwardResult>((resolve) => {
      this.lastId = this.lastId >= MAX_CALL_ID ? 1 : this.lastId + 1;
      const id = this.lastId;
      const call: PendingCall = {
        id,
        functionId,
        data,
        deadline: options.deadline,
        requestId: options.requestId,
        traceparent: options.traceparent,
        baggage: options.baggage,
        metadata: options.metadata,
        channels: options.channels,
        resolve,
        connection: null,
        dueAt: now + remainingMs,
        slot: -1,
      };
      this.pending.set(id, call);
      this.deadlines.add(call);
      const connection = this.usableConnection();
      if (typeof connection === 'string') this.settle(call, notDispatched(connection));
      else if (connection.state === 'ready') this.writeCall(connection, call);
      else this.waiting.push(call);
    });
  }

  /** Fire and forget: no answer, no deadline; dropped (logged at debug) if the peer is unreachable. */
  fire(functionId: string, data: unknown, metadata?: unknown): void {
    if (this.closed) return;
    const connection = this.usableConnection();
    if (typeof connection === 'string') this.logger.debug({ functionId, reason: connection }, 'void call dropped');
    else if (connection.state === 'ready') this.writeFire(connection, { functionId, data, metadata });
    else this.waiting.push({ functionId, data, metadata });
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    this.waiting = [];
    for (const call of [...this.pending.values()]) {
      this.settle(
        call,
        call.connection === null
          ? notDispatched('forward client closed')
          : { dispatched: true, outcome: engineFailure('WORKER_DISCONNECTED', 'forward client closed while the call was in flight') },
      );
    }
    const connection = this.connection;
    this.connection = null;
    await connection?.end(); // void calls already accepted still go out
  }

  /** The current connection (opening one unless backing off), or why there is none. */
  private usableConnection(): ForwardConnection | string {
    if (this.connection !== null) return this.connection;
    const waitMs = this.retryAt - performance.now();
    if (waitMs > 0) return `peer ${this.address} unreachable (${this.lastFailure}); next attempt in ${Math.ceil(waitMs)} ms`;
    const settings = { hello: this.hello, connectTimeoutMs: this.options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS, maxFrameBytes: this.maxFrameBytes };
    const connection: ForwardConnection = new ForwardConnection(this.target, settings, {
      ready: () => this.onReady(connection),
      result: (id, outcome) => this.onResult(connection, id, outcome),
      closed: (reason, wasReady) => this.onClosed(connection, reason, wasReady),
    });
    this.connection = connection;
    return connection;
  }

  private onReady(connection: ForwardConnection): void {
    this.backoffMs = 0;
    this.retryAt = 0;
    this.logger.debug('forward connection ready');
    const waiting = this.waiting;
    this.waiting = [];
    for (const item of waiting) {
      if (!isCall(item)) this.writeFire(connection, item);
      else if (this.pending.get(item.id) === item) this.writeCall(connection, item);
    }
  }

  private onResult(connection: ForwardConnection, id: number, outcome: InvocationOutcome): void {
    const call = this.pending.get(id);
    // Absent: it timed out already, and the late answer is dropped.
    if (call === undefined || call.connection !== connection) return;
    // The worker left that peer before the call reached it: nothing ran, another owner may serve it.
    if (!outcome.ok && outcome.failure.source === 'engine' && outcome.failure.code === 'FUNCTION_UNAVAILABLE') {
      this.settle(call, notDispatched(`peer ${this.address}: ${outcome.failure.message}`));
    } else {
      this.settle(call, { dispatched: true, outcome });
    }
  }

  /** Calls written on the connection may have run (disconnected); those still waiting did not. */
  private onClosed(connection: ForwardConnection, reason: string, wasReady: boolean): void {
    if (this.connection === connection) this.connection = null;
    if (wasReady) {
      this.logger.warn({ reason }, 'forward connection lost');
    } else {
      // Only a failed attempt backs off: a drop after a good handshake reconnects on the next call.
      const firstFailure = this.backoffMs === 0;
      this.backoffMs = Math.min(Math.max(this.backoffMs * 2, BACKOFF_MIN_MS), BACKOFF_MAX_MS);
      this.retryAt = performance.now() + this.backoffMs;
      this.lastFailure = reason;
      // A peer that stays down would otherwise log at warn once per backoff period.
      this.logger[firstFailure ? 'warn' : 'debug']({ reason, retryInMs: this.backoffMs }, 'forward connection failed');
    }
    const disconnected: ForwardResult = {
      dispatched: true,
      outcome: engineFailure('WORKER_DISCONNECTED', `connection to peer ${this.address} lost after the call was sent (${reason})`),
    };
    for (const call of [...this.pending.values()]) {
      if (call.connection === connection) this.settle(call, disconnected);
    }
    const waiting = this.waiting;
    this.waiting = [];
    for (const item of waiting) {
      if (isCall(item)) this.settle(item, notDispatched(`peer ${this.address} unreachable: ${reason}`));
    }
  }

  private writeCall(connection: ForwardConnection, call: PendingCall): void {
    const remainingMs = Math.min(call.deadline - performance.now(), MAX_WAIT_MS);
    if (!(remainingMs > 0)) {
      this.settle(call, { dispatched: true, outcome: engineFailure('TIMEOUT', `deadline passed before ${call.functionId} was forwarded`) });
      return;
    }
    let frame: Buffer;
    try {
      const message = {
        id: call.id,
        functionId: call.functionId,
        data: call.data,
        remainingMs: Math.ceil(remainingMs),
        requestId: call.requestId,
        isVoid: false,
        traceparent: call.traceparent,
        baggage: call.baggage,
        metadata: call.metadata,
        channels: call.channels,
      };
      frame = connection.binaryCalls ? encodeBinaryCall(message, this.maxFrameBytes) : encodeCall(message, this.maxFrameBytes);
    } catch (err) {
      this.settle(call, notDispatched(`call cannot be forwarded: ${(err as Error).message}`));
      return;
    }
    call.connection = connection;
    call.data = undefined; // the frame holds it now; no second reference while in flight
    connection.write(frame);
  }

  private writeFire(connection: ForwardConnection, fire: WaitingFire): void {
    try {
      const message = { id: 0, functionId: fire.functionId, data: fire.data, remainingMs: 0, requestId: undefined, isVoid: true, metadata: fire.metadata };
      connection.write(connection.binaryCalls ? encodeBinaryCall(message, this.maxFrameBytes) : encodeCall(message, this.maxFrameBytes));
    } catch (err) {
      this.logger.warn({ err, functionId: fire.functionId }, 'void call cannot be forwarded');
    }
  }

  private settle(call: PendingCall, result: ForwardResult): void {
    if (!this.pending.delete(call.id)) return;
    this.deadlines.remove(call);
    call.resolve(result);
  }
}
