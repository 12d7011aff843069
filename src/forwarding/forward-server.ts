import { createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { Tracing } from '../observability/tracing.js';
import type { InvocationOutcome, Invoker } from '../invocation/invoker.js';
import { engineFailure } from '../invocation/invoker.js';
import { toJson } from '../invocation/raw-json.js';
import { DEFAULT_MAX_FRAME_BYTES, FrameDecoder, FrameWriter } from './forward-frames.js';
import { listen } from '../net/listen.js';
import { listenUnix } from './forward-listen.js';
import type { ForwardTls } from './forward-tls.js';
import { forwardTcpServer } from './forward-tls.js';
import type { CallMessage, ChannelAttachMessage, ClientMessage, HelloMessage, ResultForms } from './forward-messages.js';
import {
  FORWARD_PROTOCOL_VERSION,
  HELLO_MAX_FRAME_BYTES,
  PROOF_WINDOW_MS,
  RETIRE_WORKER_FUNCTION,
  VALUE_RESULTS,
  decodeClientMessage,
  encodeHelloOk,
  encodeReject,
  encodeResult,
  proofHolds,
  resultFormsFor,
} from './forward-messages.js';

export interface ForwardServerOptions {
  /** Unix socket for sibling processes on this host. */
  socketPath?: string;
  /** TCP listener for peers on other hosts; port 0 picks a free port. */
  tcp?: { host: string; port: number };
  /** Mutual TLS on the TCP listener (forward-tls.ts). */
  tls?: ForwardTls;
  secret: string;
  cluster: string;
  /** The LOCAL invoker: a forwarded call is never forwarded again. */
  invoker: Invoker;
  logger: Logger;
  maxFrameBytes?: number;
  /** A connection that has not completed the handshake by then is closed. */
  helloTimeoutMs?: number;
  /** How long close() lets calls in progress finish before it ends the connections. */
  drainTimeoutMs?: number;
  /** A peer asks to retire a worker connection held here (RETIRE_WORKER_FUNCTION). */
  onRetire?: (workerId: string, reattachToken: string) => void;
  /**
   * A peer joins a streaming channel held here for a worker whose channel socket landed on it:
   * `refused` with why, or `attach` to hand the socket over once it has been told yes.
   */
  onChannelAttach?: (request: ChannelAttachRequest) => ChannelAttachDecision;
  /** Spans for forwarded calls, when the engine exports traces (docs/observability.md). */
  tracing?: Pick<Tracing, 'forwarded'>;
}

export interface ChannelAttachRequest {
  channelId: string;
  key: string;
  direction: 'read' | 'write';
  peerId: string;
}

export type ChannelAttachDecision = { refused: 'not_found' | 'in_use' } | { attach: (socket: Socket) => void };

interface PeerConnection {
  socket: Socket;
  writer: FrameWriter;
  decoder: FrameDecoder;
  state: 'hello' | 'ready' | 'closed';
  remote: string;
  peerId: string | undefined;
  inFlight: number;
  helloTimer: NodeJS.Timeout | undefined;
  /** How results are written to this client: what its hello said it reads. */
  resultForms: ResultForms;
}

const DEFAULT_HELLO_TIMEOUT_MS = 5000;
const DEFAULT_DRAIN_TIMEOUT_MS = 2000;
// A refused client gets this long to read the reason and hang up before its socket is destroyed.
const REJECT_GRACE_MS = 1000;
const KEEPALIVE_DELAY_MS = 10_000;

/**
 * Nonces of the hellos accepted within the proof window: a recorded hello cannot open a second
 * connection. Bounded: past MAX_NONCES the oldest are forgotten (a replay then still needs a hello
 * younger than the window that this server has already forgotten, i.e. over 100,000 hellos ago).
 */
class NonceMemory {
  private readonly seen = new Map<string, number>();

  remember(nonce: string, now = Date.now()): boolean {
    if (nonce.length < 16 || this.seen.has(nonce)) return false;
    this.seen.set(nonce, now);
    if (this.seen.size > MAX_NONCES) {
      for (const [held, at] of this.seen) {
        if (this.seen.size <= MAX_NONCES && now - at < PROOF_WINDOW_MS * 2) break;
        this.seen.delete(held);
      }
    }
    return true;
  }
}

const MAX_NONCES = 100_000;

/**
 * The forward listener: peers' calls come in over a Unix socket and/or TCP, run through the local
 * invoker, and their outcomes go back on the same connection as soon as each one is known (in any
 * order). Only clients that present the cluster name and secret are served. The protocol: forward-messages.ts.
 */
export class ForwardServer {
  private readonly servers: Server[] = [];
  private readonly connections = new Set<PeerConnection>();
  private readonly logger: Logger;
  private readonly nonces = new NonceMemory();
  private readonly maxFrameBytes: number;
  private draining = false;
  private closing: Promise<void> | undefined;
  private drained: (() => void) | undefined;

  constructor(private readonly options: ForwardServerOptions) {
    if (options.socketPath === undefined && options.tcp === undefined) {
      throw new TypeError('the forward server needs a socketPath, a tcp address, or both');
    }
    if (options.secret.length === 0) throw new TypeError('the forward server needs a non-empty cluster secret');
    this.logger = options.logger;
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  }

  async start(): Promise<{ socketPath?: string; port?: number }> {
    const bound: { socketPath?: string; port?: number } = {};
    if (this.options.socketPath !== undefined) {
      await listenUnix(this.newServer(), this.options.socketPath);
      bound.socketPath = this.options.socketPath;
    }
    if (this.options.tcp !== undefined) {
      const server = forwardTcpServer(this.options.tls, (socket) => this.accept(socket), () => this.newServer());
      if (this.options.tls !== undefined) {
        this.servers.push(server);
        // A peer without a certificate the cluster CA signed never reaches the hello.
        server.on('tlsClientError', (err: Error) => this.logger.warn({ reason: err.message }, 'forward connection refused: TLS handshake failed'));
      }
      // exclusive: inside a node:cluster child a shared handle would hand peers to random siblings.
      await listen(server, { host: this.options.tcp.host, port: this.options.tcp.port, exclusive: true });
      const address = server.address();
      if (address !== null && typeof address === 'object') bound.port = address.port;
    }
    this.logger.info(bound, 'forward listener started');
    return bound;
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.draining = true;
    const stopped = this.servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve())));
    await this.drain(this.options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS);
    const ended = [...this.connections].map((connection) => this.end(connection));
    await Promise.all([...ended, ...stopped]);
  }

  /** Waits until no call is in progress, or the timeout. */
  private async drain(timeoutMs: number): Promise<void> {
    if (this.inFlight() === 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.drained = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.drained = undefined;
  }

  private inFlight(): number {
    let count = 0;
    for (const connection of this.connections) count += connection.inFlight;
    return count;
  }

  private end(connection: PeerConnection): Promise<void> {
    connection.state = 'closed';
    clearTimeout(connection.helloTimer);
    const { socket } = connection;
    if (socket.closed) return Promise.resolve();
    connection.writer.flush();
    return new Promise<void>((resolve) => {
      const force = setTimeout(() => socket.destroy(), REJECT_GRACE_MS);
      socket.once('close', () => {
        clearTimeout(force);
        resolve();
      });
      socket.end();
    });
  }

  private newServer(): Server {
    const server = createServer((socket) => this.accept(socket));
    this.servers.push(server);
    return server;
  }

  private accept(socket: Socket): void {
    if (this.draining) {
      socket.destroy();
      return;
    }
    socket.setNoDelay(true);
    if (socket.remoteAddress !== undefined) socket.setKeepAlive(true, KEEPALIVE_DELAY_MS);
    const remote = socket.remoteAddress === undefined ? (this.options.socketPath ?? 'unix') : `${socket.remoteAddress}:${socket.remotePort}`;
    const connection: PeerConnection = {
      socket,
      writer: new FrameWriter(socket),
      decoder: new FrameDecoder(HELLO_MAX_FRAME_BYTES),
      state: 'hello',
      remote,
      peerId: undefined,
      inFlight: 0,
      helloTimer: undefined,
      resultForms: VALUE_RESULTS,
    };
    const helloTimeoutMs = this.options.helloTimeoutMs ?? DEFAULT_HELLO_TIMEOUT_MS;
    connection.helloTimer = setTimeout(() => this.reject(connection, `no handshake within ${helloTimeoutMs} ms`), helloTimeoutMs);
    this.connections.add(connection);
    socket.on('data', (chunk: Buffer) => {
      try {
        connection.decoder.push(chunk, (body) => {
          if (connection.state !== 'closed') this.onMessage(connection, decodeClientMessage(body));
        });
      } catch (err) {
        this.reject(connection, (err as Error).message);
      }
    });
    socket.on('error', (err) => {
      this.logger.debug({ err, remote }, 'forward connection error');
    });
    socket.on('close', () => {
      connection.state = 'closed';
      clearTimeout(connection.helloTimer);
      this.connections.delete(connection);
      // Its calls no longer count toward the drain: their answers have nowhere to go.
      if (this.drained !== undefined && this.inFlight() === 0) this.drained();
      this.logger.debug({ remote, peerId: connection.peerId }, 'forward connection closed');
    });
  }

  private onMessage(connection: PeerConnection, message: ClientMessage): void {
    if (connection.state === 'ready') {
      if (message.kind === 'call') this.onCall(connection, message);
      else this.reject(connection, 'second hello on a connection');
      return;
    }
    if (message.kind === 'channelAttach') {
      this.onChannelAttach(connection, message);
      return;
    }
    if (message.kind !== 'hello') {
      this.reject(connection, 'call before the handshake');
      return;
    }
    const reason = this.checkHello(message);
    if (reason !== undefined) {
      this.reject(connection, reason, message.peerId);
      return;
    }
    connection.state = 'ready';
    connection.peerId = message.peerId;
    connection.resultForms = resultFormsFor(message.features);
    connection.decoder.maxFrameBytes = this.maxFrameBytes;
    clearTimeout(connection.helloTimer);
    connection.writer.write(encodeHelloOk());
    this.logger.debug({ remote: connection.remote, peerId: message.peerId }, 'forward connection accepted');
  }

  /**
   * A connection that carries one channel end: authenticated like any peer, then, once told yes, no
   * longer this server's (no calls, not drained): the channel owns the socket until either side ends.
   */
  private onChannelAttach(connection: PeerConnection, message: ChannelAttachMessage): void {
    const reason = this.checkHello(message);
    if (reason !== undefined) {
      this.reject(connection, reason, message.peerId);
      return;
    }
    const decision = this.options.onChannelAttach?.({
      channelId: message.channelId,
      key: message.key,
      direction: message.direction,
      peerId: message.peerId,
    }) ?? { refused: 'not_found' as const };
    if ('refused' in decision) {
      this.reject(connection, decision.refused, message.peerId);
      return;
    }
    connection.state = 'closed';
    clearTimeout(connection.helloTimer);
    this.connections.delete(connection);
    const { socket } = connection;
    socket.removeAllListeners('data');
    socket.removeAllListeners('close');
    socket.removeAllListeners('error');
    connection.writer.flush();
    socket.write(encodeHelloOk());
    decision.attach(socket);
  }

  /**
   * The hello's proof, made with the cluster secret (which never crosses the wire), fresh and not
   * seen before. The proof is checked even when the cluster is wrong, so timing tells nothing about
   * which failed.
   */
  private checkHello(message: HelloMessage | ChannelAttachMessage): string | undefined {
    if (message.version !== FORWARD_PROTOCOL_VERSION) {
      return `unsupported protocol version ${message.version} (this peer speaks ${FORWARD_PROTOCOL_VERSION})`;
    }
    const proofOk = proofHolds(this.options.secret, message);
    if (message.cluster !== this.options.cluster) return `wrong cluster name "${message.cluster}"`;
    if (!proofOk) return 'wrong cluster secret';
    if (Math.abs(Date.now() - message.timestampMs) > PROOF_WINDOW_MS) return 'hello too old or from the future (check the clocks)';
    if (!this.nonces.remember(message.nonce)) return 'hello replayed';
    return undefined;
  }

  private onRetire(connection: PeerConnection, data: unknown): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(toJson(data));
    } catch {
      parsed = undefined;
    }
    const request = parsed as { worker_id?: unknown; reattach_token?: unknown } | undefined;
    if (typeof request?.worker_id !== 'string' || typeof request.reattach_token !== 'string') {
      this.logger.warn({ peerId: connection.peerId }, 'malformed retire-worker request ignored');
      return;
    }
    this.options.onRetire?.(request.worker_id, request.reattach_token);
  }

  private onCall(connection: PeerConnection, call: CallMessage): void {
    const { invoker } = this.options;
    if (call.isVoid && call.functionId === RETIRE_WORKER_FUNCTION) {
      this.onRetire(connection, call.data);
      return;
    }
    if (call.isVoid) {
      if (!invoker.fire(call.functionId, call.data, call.metadata)) {
        this.logger.debug({ functionId: call.functionId, peerId: connection.peerId }, 'forwarded void call has no local worker');
      }
      return;
    }
    if (this.draining) {
      // Not run here: the client reports it as not dispatched and can try another owner.
      this.reply(connection, call.id, engineFailure('FUNCTION_UNAVAILABLE', 'peer is shutting down'));
      return;
    }
    connection.inFlight += 1;
    // With tracing on, the call gets a span here (child of the caller's invocation span) and the
    // worker's spans become its children; otherwise the caller's context goes on as it came.
    const span = this.options.tracing?.forwarded(call.traceparent, call.baggage, call.functionId);
    const traceparent = span?.traceparent ?? call.traceparent;
    const options = {
      deadline: performance.now() + call.remainingMs,
      ...(call.requestId === undefined ? {} : { requestId: call.requestId }),
      ...(traceparent === undefined ? {} : { traceparent }),
      ...(call.baggage === undefined ? {} : { baggage: call.baggage }),
      ...(call.metadata === undefined ? {} : { metadata: call.metadata }),
      ...(call.channels === undefined ? {} : { channels: call.channels }),
    };
    let result: Promise<InvocationOutcome>;
    try {
      result = invoker.invoke(call.functionId, call.data, options);
    } catch (err) {
      result = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    // The local worker has its invocation (serialised, or queued towards it): the payload is not
    // held here until the answer, only what the answer needs (docs/security.md#connections).
    const { id, functionId, requestId } = call;
    const started = performance.now();
    result.then(
      (outcome) => {
        // The same request id as the access line on the peer that forwarded it: one id on every hop.
        if (this.logger.isLevelEnabled('debug')) this.logger.debug(
          { requestId, functionId, fromPeer: connection.peerId, ok: outcome.ok, durationMs: Math.round((performance.now() - started) * 100) / 100 },
          'forwarded call',
        );
        span?.end(outcome.ok ? undefined : outcome.failure);
        this.finishCall(connection, id, outcome);
      },
      (err: unknown) => {
        this.logger.error({ err, functionId, requestId }, 'local invoker failed a forwarded call');
        span?.end({ code: 'INTERNAL_ERROR', message: 'the local invoker failed' });
        // It may have reached the worker before failing, so it must not be retried elsewhere.
        this.finishCall(connection, id, engineFailure('WORKER_DISCONNECTED', `the invocation of ${functionId} failed on the peer`));
      },
    );
  }

  private finishCall(connection: PeerConnection, id: number, outcome: InvocationOutcome): void {
    connection.inFlight -= 1;
    this.reply(connection, id, outcome);
    if (this.drained !== undefined && this.inFlight() === 0) this.drained();
  }

  private reply(connection: PeerConnection, id: number, outcome: InvocationOutcome): void {
    // The caller went away (it has settled the call as disconnected); the outcome has nowhere to go.
    if (connection.state === 'closed') return;
    let frame: Buffer;
    try {
      frame = encodeResult(id, outcome, this.maxFrameBytes, connection.resultForms);
    } catch (err) {
      this.logger.warn({ err, peerId: connection.peerId }, 'forwarded call result cannot be sent');
      const failure = engineFailure('WORKER_DISCONNECTED', `the result cannot be sent back: ${(err as Error).message}`);
      frame = encodeResult(id, failure, this.maxFrameBytes);
    }
    connection.writer.write(frame);
  }

  /** Refuses a connection: says why (to the log and to the client), then closes it. */
  private reject(connection: PeerConnection, reason: string, peerId?: string): void {
    if (connection.state === 'closed') return;
    this.logger.warn({ remote: connection.remote, peerId: peerId ?? connection.peerId, reason }, 'forward connection refused');
    connection.writer.write(encodeReject(reason));
    void this.end(connection);
  }
}
