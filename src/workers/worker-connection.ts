import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import WebSocket from 'ws';
import type { InvocationOutcome } from '../invocation/invoker.js';
import { engineFailure } from '../invocation/invoker.js';
import { randomUuid } from '../random-ids.js';
import type { HttpFunctionCaller } from '../invocation/http-function-caller.js';
import { RawJson, toJson } from '../invocation/raw-json.js';
import { WarnThrottle } from '../observability/warn-throttle.js';
import { decodeKeepingBody } from '../protocol/answer-body.js';
import { decodeFrame } from '../protocol/decode.js';
import { encodeFrame, encodeInvocation, encodeInvocationBytes } from '../protocol/encode.js';
import type { ReattachMessage } from '../protocol/messages.js';
import type { CustomTriggerRecord, FunctionRecord, TriggerRecord, TriggerTypeRecord } from '../routing/registrations.js';
import { PendingInvocations } from './pending-invocations.js';
import { providerTriggerFrame } from './registration-records.js';
import type { EngineFunction } from './engine-functions.js';
import type { HubMember, WorkerHub, WorkerInfo } from './worker-hub.js';
import type { CorkableTransport } from './worker-outbound.js';
import { ReadGate, WorkerOutbound } from './worker-outbound.js';
import { FrameRateLimit } from './frame-rate-limit.js';
import type { WorkerCallDeps } from './worker-calls.js';
import { WorkerCalls } from './worker-calls.js';
import { isPlainObject } from '../values.js';
import type { EngineTriggerTypes, WorkerLimitKind } from './worker-registrations.js';
import { WorkerRegistrations } from './worker-registrations.js';
import type { RegistrationBudget } from './registration-limits.js';
import type { QueueBudget } from './queue-budget.js';
import { REGISTRATION_LIMITS } from '../protocol/limits.js';
import type { WorkerSession } from './worker-session.js';
import { DEFAULT_LIMITS, OPEN_AUTH, WorkerSession as Session } from './worker-session.js';
import { isTelemetryFrame } from './telemetry-handoff.js';
import type { ChannelLiveness, ChannelSighting } from '../channels/channel-activity.js';

export interface WorkerConnectionDeps extends Omit<WorkerCallDeps, 'onLimit'> {
  hub: WorkerHub<WorkerConnection>;
  logger: Logger;
  ignoreTrailingSlash: boolean;
  /** Called when a worker reattaches after a reconnect (metrics). */
  onReattach?: () => void;
  /**
   * A worker reattached here whose previous connection is not on this process: the cluster finds
   * the peer that holds it and retires it there (src/cluster/membership.ts). Returns how many peers were asked.
   */
  retireElsewhere?: (previousWorkerId: string, reattachToken: string) => number;
  /** A worker was dropped by the heartbeat (metrics). */
  onFrozen?: () => void;
  /**
   * Before the heartbeat drops a silent worker that has calls in flight with streaming channels, it
   * asks this when any of those channels last moved data through a worker's socket, on this process
   * or a sibling (undefined: none lately). Unset: silence alone decides.
   */
  channelLiveness?: ChannelLiveness;
  /** Calls HTTP-invoked functions; without it, registrations with `invocation` are refused. */
  httpFunctions?: HttpFunctionCaller;
  /** A per-worker limit refused something (metrics). */
  onLimit?: (kind: WorkerLimitKind) => void;
  /** The modules' trigger types (docs/modules.md). */
  engineTriggerTypes?: EngineTriggerTypes;
  /**
   * The connection sent a telemetry frame (`OTLP`/`MTRC`/`LOGS` prefix) while holding nothing: it is
   * iii-sdk 0.9's telemetry socket, which dials `/` instead of `/otel`. The listener takes it over.
   */
  onTelemetrySocket?: (connection: WorkerConnection, frame: Buffer) => void;
  /** The process's share of registration bytes (docs/security.md#limits). */
  registrationBudget?: RegistrationBudget;
  /** The listener's share of registration bytes in this process (max_listener_registration_bytes). */
  listenerRegistrations?: RegistrationBudget;
  /** What the engine has queued towards the workers of this connection's listener in this process (docs/security.md#connections). */
  listenerQueues?: QueueBudget;
}


/** At most this many channel ids go into one liveness question (a worker's calls in flight are capped too). */
export const MAX_LIVENESS_CHANNELS = 256;

/** The engine function the SDK calls right after connecting, with its metadata. */
export const REGISTER_WORKER_FUNCTION = 'engine::workers::register';

/** engine::workers::register: the worker tells who it is (name, runtime, version, os, pid); iii answers `{success: true}`. */
export const registerWorkerFunction: EngineFunction = (data, caller) => {
  caller.recordInfo(data);
  return { ok: true, value: { success: true } };
};

/** Malformed frames: the first few per connection and interval are warnings, the rest debug. */
const MALFORMED_WARN_INTERVAL_MS = 10_000;
const MALFORMED_WARNS_PER_INTERVAL = 10;

let nextHeartbeatSlot = 0;

/** WebSocket close code for a worker closed for breaking a limit. */
const CLOSE_POLICY_VIOLATION = 1008;
/** WebSocket close code for a worker closed because the engine could not handle what it sent. */
const CLOSE_INTERNAL_ERROR = 1011;

const isRecord = isPlainObject;

/**
 * One worker's WebSocket: decodes its frames, hands its registrations to `registrations`
 * (worker-registrations.ts), and owns the invocations pending on it, settling every one of them
 * when the socket goes away.
 */
export class WorkerConnection implements HubMember {
  readonly id = randomUUID();
  readonly reattachToken = randomUUID();
  readonly connectedAt = Date.now();
  /** Which tick of the heartbeat interval pings this worker (spreads the pings over the interval). */
  readonly heartbeatSlot = nextHeartbeatSlot++;
  /** What this worker registered, and how each registration is admitted. */
  readonly registrations: WorkerRegistrations<WorkerConnection>;
  readonly functions: ReadonlyMap<string, FunctionRecord>;
  readonly triggers: ReadonlyMap<string, TriggerRecord>;
  readonly triggerTypes: ReadonlyMap<string, TriggerTypeRecord>;
  readonly customTriggers: ReadonlyMap<string, CustomTriggerRecord>;
  readonly services = new Map<string, { name?: string; description?: string }>();
  /** As a trigger type's provider: the triggers delivered to it, by id, with what was delivered. */
  readonly delivered = new Map<string, { trigger: CustomTriggerRecord; fingerprint: string }>();
  readonly pending = new PendingInvocations();
  info: WorkerInfo = {};
  private gone = false;
  /** The calls this worker makes (RBAC, listener middleware, max_calls_in_flight). */
  private readonly calls: WorkerCalls;
  /** max_frames_per_second (none when 0). */
  private readonly frameRate: FrameRateLimit | undefined;
  /** Heartbeat ticks since the last frame or pong from the worker (or data on its calls' channels). */
  private silentTicks = 0;
  /** A question about this worker's channel traffic is out; its answer drops the worker or keeps it. */
  private askingChannels = false;
  private readonly malformedWarnings: WarnThrottle;
  private readonly logger: Logger;
  private readonly outbound: WorkerOutbound;
  private readonly reads: ReadGate;

  constructor(
    private readonly socket: WebSocket,
    private readonly deps: WorkerConnectionDeps,
    readonly remoteAddress: string,
    /** The socket under the WebSocket, when the caller has it: sends are batched on it. */
    transport?: CorkableTransport,
    /** What this connection may do; unset: the main listener's open session. */
    readonly session: WorkerSession = new Session({ index: 0, limits: DEFAULT_LIMITS }, OPEN_AUTH),
  ) {
    this.logger = deps.logger.child({ workerId: this.id });
    this.malformedWarnings = new WarnThrottle(this.logger, MALFORMED_WARN_INTERVAL_MS, MALFORMED_WARNS_PER_INTERVAL);
    this.reads = new ReadGate(socket);
    this.outbound = new WorkerOutbound(socket, this.logger, () => this.closed, transport, {
      maxQueuedBytes: session.policy.limits.maxQueuedBytes,
      onOverflow: (queued, listenerTotal) => {
        const limit = listenerTotal === undefined ? 'max_queued_bytes' : 'max_listener_queued_bytes';
        this.deps.onLimit?.(listenerTotal === undefined ? 'queued_bytes' : 'listener_queued_bytes');
        this.logger.warn(
          { queuedBytes: queued, ...(listenerTotal === undefined ? { limit: session.policy.limits.maxQueuedBytes } : { listenerQueuedBytes: listenerTotal, limit: deps.listenerQueues?.maxBytes }) },
          `worker does not read what it is sent: closing it (${limit})`,
        );
        this.close(CLOSE_POLICY_VIOLATION, `${limit} exceeded`);
        this.socket.terminate();
      },
      ...(deps.listenerQueues === undefined ? {} : { budget: deps.listenerQueues }),
    }, this.reads);
    const maxFrames = session.policy.limits.maxFramesPerSecond;
    this.frameRate =
      maxFrames === 0
        ? undefined
        : new FrameRateLimit(maxFrames, this.reads, (frame) => this.handleFrame(frame), () => {
            this.deps.onLimit?.('frames_per_second');
            this.logger.warn({ limit: maxFrames }, 'worker sends more frames per second than max_frames_per_second: reading paused for the rest of the second');
          });
    this.calls = new WorkerCalls(this, deps, this.logger);
    this.registrations = new WorkerRegistrations<WorkerConnection>(this, session, deps, this.logger);
    ({ functions: this.functions, triggers: this.triggers, triggerTypes: this.triggerTypes, customTriggers: this.customTriggers } = this.registrations);
  }

  get principal(): string {
    return this.session.principal;
  }

  /** The socket went away and everything it held was removed (once). */
  get closed(): boolean {
    return this.gone;
  }

  get isOpen(): boolean {
    return !this.gone && this.socket.readyState === WebSocket.OPEN;
  }

  start(): void {
    this.deps.hub.add(this);
    this.socket.on('message', (data: WebSocket.RawData) => this.receive(data));
    this.socket.on('pong', () => {
      this.silentTicks = 0;
    });
    this.socket.on('ping', () => {
      this.silentTicks = 0;
    });
    this.socket.on('close', (code: number, reason: Buffer) => this.handleClose(code, reason.toString('utf8')));
    this.socket.on('error', (err: Error) => this.logger.warn({ err }, 'worker socket error'));
    this.send(encodeFrame({ type: 'workerregistered', worker_id: this.id, reattach_token: this.reattachToken }));
    this.logger.info({ remoteAddress: this.remoteAddress }, 'worker connected');
  }

  /** One frame from the worker (also frames that arrived while its session was being authenticated). */
  receive(data: WebSocket.RawData): void {
    this.silentTicks = 0;
    if (this.frameRate === undefined) this.handleFrame(data);
    else this.frameRate.receive(data);
  }

  /**
   * Sends a frame (text, or its UTF-8 bytes: sent as a text frame all the same); false when the socket
   * is no longer open (the caller settles what it waits for).
   */
  send(frame: string | Buffer): boolean {
    if (!this.isOpen) return false;
    this.outbound.send(frame);
    return true;
  }

  invoke(
    functionId: string,
    data: unknown,
    timeoutMs: number,
    trace?: { traceparent?: string; baggage?: string; metadata?: unknown; channels?: readonly string[] },
  ): Promise<InvocationOutcome> {
    const invocationId = randomUuid();
    const httpTarget = this.functions.get(functionId)?.invocation;
    if (httpTarget !== undefined && this.deps.httpFunctions !== undefined) {
      return this.deps.httpFunctions.call(functionId, httpTarget, data, timeoutMs, invocationId);
    }
    // Serialised first: data that cannot become JSON throws here, leaving nothing pending.
    const metadataJson = trace?.metadata === undefined ? undefined : toJson(trace.metadata);
    const workerFunctionId = this.session.workerId(functionId);
    // A request body still in its bytes is copied into the frame as is: no text made of it.
    const frame = data instanceof RawJson && data.parts !== undefined
      ? encodeInvocationBytes(invocationId, workerFunctionId, data.parts, trace?.traceparent, trace?.baggage, metadataJson)
      : encodeInvocation(invocationId, workerFunctionId, toJson(data), trace?.traceparent, trace?.baggage, metadataJson);
    const result = this.pending.add(invocationId, functionId, timeoutMs, trace?.channels);
    if (!this.send(frame)) {
      // Never sent, so it ran nowhere: FUNCTION_UNAVAILABLE lets the caller try another worker.
      this.pending.resolve(invocationId, engineFailure('FUNCTION_UNAVAILABLE', `worker ${this.id} left before the call was sent`));
    }
    return result;
  }

  fire(functionId: string, data: unknown, metadata?: unknown): boolean {
    const httpTarget = this.functions.get(functionId)?.invocation;
    if (httpTarget !== undefined && this.deps.httpFunctions !== undefined) {
      void this.deps.httpFunctions.call(functionId, httpTarget, data, this.deps.workerCallTimeoutMs).then((outcome) => {
        if (!outcome.ok) this.logger.warn({ functionId, code: outcome.failure.code, reason: outcome.failure.message }, 'fire-and-forget HTTP function call failed');
      });
      return true;
    }
    return this.send(
      `{"type":"invokefunction","function_id":${JSON.stringify(this.session.workerId(functionId))},"data":${toJson(data)},"action":{"type":"void"}${metadata === undefined ? '' : `,"metadata":${toJson(metadata)}`}}`,
    );
  }

  /** As a trigger type's provider: hands it a trigger to serve (iii's `registertrigger` to the provider). */
  deliverTrigger(trigger: CustomTriggerRecord): void {
    this.send(providerTriggerFrame('registertrigger', trigger));
  }

  /** As a trigger type's provider: takes a trigger back (its owner left or unregistered it). */
  withdrawTrigger(trigger: CustomTriggerRecord): void {
    this.send(providerTriggerFrame('unregistertrigger', trigger));
  }

  /** Closes the socket; cleanup happens once, in the close handler. */
  close(code: number, reason: string): void {
    if (this.socket.readyState === WebSocket.OPEN || this.socket.readyState === WebSocket.CONNECTING) {
      this.socket.close(code, reason);
    }
  }

  /** Ends the connection at once without a closing handshake (a peer that does not answer). */
  terminate(): void {
    this.socket.terminate();
  }

  /**
   * One heartbeat tick: pings the worker, or drops it when it has sent nothing (not even a pong)
   * for `maxSilentTicks` ticks — a frozen or half-open worker. A silent worker with calls in flight
   * that carry streaming channels is first looked up: a worker whose event loop is busy writing a
   * stream answers no ping, yet its channel socket moves data (docs/reliability.md). If any of
   * those channels moved data within the timeout, the worker is alive and its silence counts from
   * then; otherwise, or when the question fails, it is dropped.
   */
  heartbeat(maxSilentTicks: number, intervalMs: number): void {
    if (this.closed) return;
    if (++this.silentTicks > maxSilentTicks) {
      // The question's answer decides; until it comes the worker is pinged as before.
      if (!this.askingChannels && !this.askAboutChannels(maxSilentTicks, intervalMs)) {
        this.dropFrozen((this.silentTicks - 1) * intervalMs);
        return;
      }
    }
    if (this.socket.readyState === WebSocket.OPEN) this.socket.ping();
  }

  /** Asks whether this worker's calls' channels moved data lately; false when there is nothing to ask. */
  private askAboutChannels(maxSilentTicks: number, intervalMs: number): boolean {
    const liveness = this.deps.channelLiveness;
    if (liveness === undefined) return false;
    const channels = this.pending.channelIds(MAX_LIVENESS_CHANNELS);
    if (channels.length === 0) return false;
    const timeoutMs = maxSilentTicks * intervalMs;
    this.askingChannels = true;
    const decide = (seen: ChannelSighting | undefined): void => {
      this.askingChannels = false;
      if (this.closed || this.silentTicks <= maxSilentTicks) return; // it spoke meanwhile
      if (seen !== undefined && seen.agoMs < timeoutMs) {
        // Its silence now counts from the channel's last data, so a worker that stops there too is
        // dropped one timeout later, as one that stops answering pings is.
        this.silentTicks = Math.floor(seen.agoMs / intervalMs);
        this.logger.debug({ channelAgoMs: Math.round(seen.agoMs), seenOn: seen.where, channels: channels.length }, 'worker answers no ping but its channels move data: kept');
        return;
      }
      this.dropFrozen((this.silentTicks - 1) * intervalMs);
    };
    liveness.lastMoved(channels, timeoutMs).then(decide, () => decide(undefined));
    return true;
  }

  private dropFrozen(silentMs: number): void {
    this.logger.warn({ silentMs }, 'worker sent nothing, not even a pong: dropping it as frozen');
    this.cleanup(`no frame or pong for ${silentMs} ms (heartbeat)`);
    this.socket.terminate();
    this.deps.onFrozen?.();
  }

  /** A fault while handling one frame costs this worker its connection, never the process. */
  private handleFrame(data: WebSocket.RawData): void {
    try {
      this.dispatchFrame(data);
    } catch (err) {
      this.logger.error({ err }, 'worker frame could not be handled: closing the worker');
      this.close(CLOSE_INTERNAL_ERROR, 'internal error');
    }
  }

  private dispatchFrame(data: WebSocket.RawData): void {
    const raw = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    // iii-sdk 0.9's telemetry socket on `/` (telemetry-handoff.ts).
    if (isTelemetryFrame(raw) && this.deps.onTelemetrySocket !== undefined && this.holdsNothing()) {
      this.deps.onTelemetrySocket(this, raw);
      return;
    }
    // A large answer keeps its body as bytes when that is certain to be right (answer-body.ts).
    const decoded = decodeKeepingBody(raw) ?? decodeFrame(raw);
    if (decoded.kind === 'invalid') {
      this.malformed({ code: decoded.code, reason: decoded.reason, bytes: raw.length });
      return;
    }
    if (decoded.kind === 'ignored') {
      this.logger.debug({ type: decoded.type }, 'unknown worker message type ignored');
      return;
    }
    const message = decoded.message;
    switch (message.type) {
      case 'invocationresult': {
        const outcome: InvocationOutcome =
          message.error !== undefined
            ? { ok: false, failure: { source: 'worker', ...message.error } }
            : { ok: true, value: message.result, frame: raw };
        if (!this.pending.resolve(message.invocation_id, outcome)) {
          this.logger.debug({ invocationId: message.invocation_id }, 'result for an invocation not pending here ignored');
        }
        return;
      }
      case 'invokefunction':
        this.calls.handle(message, raw.length);
        return;
      case 'registerfunction':
      case 'unregisterfunction':
      case 'registertrigger':
      case 'unregistertrigger':
      case 'registertriggertype':
      case 'unregistertriggertype':
        this.registrations.receive(message);
        return;
      case 'ping':
        this.send(encodeFrame({ type: 'pong' }));
        return;
      case 'pong':
        return;
      case 'reattach':
        this.handleReattach(message);
        return;
      case 'registerservice':
        this.services.set(message.id, { name: message.name, description: message.description });
        return;
      case 'triggerregistrationresult':
        // A provider refused a trigger delivered to it: the binding stays (it is redelivered when a
        // provider registers the type again); the refusal is logged here, not relayed to its owner.
        if (message.error !== undefined) {
          this.logger.warn(
            { triggerId: message.id, triggerType: message.trigger_type, functionId: message.function_id, code: message.error.code, reason: message.error.message },
            'trigger provider refused a trigger',
          );
        }
        return;
    }
  }

  /** Logs a malformed frame: a warning for the first few per interval, then debug (a flood cannot flood the log). */
  private malformed(fields: Record<string, unknown>): void {
    this.malformedWarnings.warn('malformed', fields, 'malformed worker frame ignored');
  }

  /** What the worker told about itself through engine::workers::register. */
  recordInfo(data: unknown): void {
    if (!isRecord(data)) return;
    const info: WorkerInfo = {};
    // Each field is cut to its limit (docs/security.md#limits): the info travels in every snapshot.
    const text = (value: unknown): string | undefined => (typeof value === 'string' ? value.slice(0, REGISTRATION_LIMITS.workerInfoChars) : undefined);
    const name = text(data.name);
    const runtime = text(data.runtime);
    const version = text(data.version);
    const os = text(data.os);
    const description = typeof data.description === 'string' ? data.description.slice(0, REGISTRATION_LIMITS.descriptionChars) : undefined;
    if (name !== undefined) info.name = name;
    if (runtime !== undefined) info.runtime = runtime;
    if (version !== undefined) info.version = version;
    if (os !== undefined) info.os = os;
    if (typeof data.pid === 'number') info.pid = data.pid;
    if (description !== undefined) info.description = description;
    info.ipAddress = this.remoteAddress;
    this.info = info;
    this.deps.hub.infoChanged();
    this.logger.info({ worker: info }, 'worker registered its metadata');
  }

  private handleReattach(message: ReattachMessage): void {
    this.deps.onReattach?.();
    const previousId = message.previous_worker_id;
    // The old socket may be half-open: retire it so it can neither hold routes nor receive calls.
    // No token never matches; a connection naming itself has nothing to retire.
    const token = message.reattach_token ?? '';
    const retired = previousId === this.id ? 'unknown' : this.deps.hub.retire(previousId, token);
    if (retired === 'retired') {
      this.logger.info({ previousWorkerId: previousId }, 'worker reattached; retired its previous connection');
      return;
    }
    if (retired === 'wrong-token') {
      this.logger.warn({ previousWorkerId: previousId }, 'reattach with a wrong token ignored');
      return;
    }
    const asked = previousId === this.id || token === '' ? 0 : (this.deps.retireElsewhere?.(previousId, token) ?? 0);
    if (asked > 0) {
      this.logger.info({ previousWorkerId: previousId, peers: asked }, 'worker reattached; asked the peer holding its previous connection to retire it');
    } else {
      this.logger.info({ previousWorkerId: previousId }, 'worker reattached (previous connection already gone)');
    }
  }

  private holdsNothing(): boolean {
    return this.functions.size === 0 && this.triggers.size === 0 && this.triggerTypes.size === 0 && this.customTriggers.size === 0 && this.pending.size === 0;
  }

  /**
   * This connection turned out to be a telemetry socket: it leaves the hub quietly (it was never a
   * worker) and stops reading; the caller hands its socket to the telemetry intake.
   */
  handOver(): WebSocket {
    this.cleanup('telemetry socket');
    for (const event of ['message', 'close', 'ping', 'pong', 'error'] as const) this.socket.removeAllListeners(event);
    return this.socket;
  }

  /** Removes this connection at once (its registrations, its pending calls) and drops the socket. */
  retire(): void {
    this.cleanup('replaced by a reattached connection');
    this.socket.terminate();
  }

  private handleClose(code: number, reason: string): void {
    this.cleanup(reason || `socket closed with code ${code}`);
    this.logger.info({ code, reason }, 'worker disconnected');
  }

  private cleanup(reason: string): void {
    if (this.gone) return;
    this.gone = true;
    this.frameRate?.close();
    this.outbound.release();
    this.deps.hub.remove(this);
    this.registrations.release();
    const failed = this.pending.failAll((functionId) =>
      engineFailure('WORKER_DISCONNECTED', `worker serving ${functionId} disconnected (${reason})`),
    );
    if (failed > 0) this.logger.warn({ failed }, 'invocations pending on a disconnected worker failed');
  }
}
