import type { IpcChannel } from './ipc-channel.js';

/**
 * Request and answer over the IPC channel a child shares with the primary (ipc-channel.ts): the child
 * sends `{sy: tag, id, ...body}`, the primary answers `{sy: "<tag>-reply", id, ok, value | message,
 * code}`. One helper for every such exchange (the embedded `kv` stores and leases today), so the id
 * counter, the deadline, the failure of what is in flight at close, and the carrying of an error's
 * code across the process boundary are written once.
 */

export interface IpcReply {
  sy: string;
  id: number;
  ok: boolean;
  value?: unknown;
  message?: string;
  /** The `code` of the error the primary threw, when it had one (e.g. VALUE_TOO_LARGE). */
  code?: string;
}

/** A request the other side failed: its message, and its code when it had one. */
export class IpcRequestError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

const replyTag = (tag: string): string => `${tag}-reply`;

function isObject(message: unknown): message is Record<string, unknown> {
  return typeof message === 'object' && message !== null && !Array.isArray(message);
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/** The asking side (a child): one pending promise per request, failed at its deadline or at close. */
export class IpcRequester<Body extends Record<string, unknown>> {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly unsubscribe: () => void;
  private closed = false;

  constructor(
    private readonly channel: IpcChannel,
    private readonly tag: string,
    private readonly timeoutMs: number,
    /** What a request is, for the error when it times out ("kv get"). */
    private readonly describe: (body: Body) => string,
  ) {
    const reply = replyTag(tag);
    this.unsubscribe = channel.onMessage((message) => {
      if (isObject(message) && message.sy === reply && typeof message.id === 'number') this.settle(message as unknown as IpcReply);
    });
  }

  request(body: Body): Promise<unknown> {
    if (this.closed) return Promise.reject(new Error(`the ${this.tag} link is closed`));
    const id = this.nextId++;
    return new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`the primary did not answer ${this.describe(body)} within ${this.timeoutMs} ms`));
      }, this.timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.channel.send({ ...body, sy: this.tag, id });
    });
  }

  /** Fails what is in flight and stops listening. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe();
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(new Error(`the ${this.tag} link closed`));
      this.pending.delete(id);
    }
  }

  private settle(reply: IpcReply): void {
    const pending = this.pending.get(reply.id);
    if (pending === undefined) return;
    this.pending.delete(reply.id);
    clearTimeout(pending.timer);
    if (reply.ok) pending.resolve(reply.value);
    else pending.reject(new IpcRequestError(reply.message ?? `${this.tag} request failed`, typeof reply.code === 'string' ? reply.code : undefined));
  }
}

/**
 * The answering side (the primary, for one child's channel): every message tagged `tag` whose body
 * `accept` takes is handled, and what the handler returns (or throws, with its `code`) is sent back.
 * Returns the unsubscribe.
 */
export function answerIpcRequests<Body>(
  channel: IpcChannel,
  tag: string,
  accept: (message: Record<string, unknown>) => message is Record<string, unknown> & Body,
  handle: (body: Body) => unknown,
): () => void {
  const sy = replyTag(tag);
  return channel.onMessage((message) => {
    if (!isObject(message) || message.sy !== tag || typeof message.id !== 'number' || !accept(message)) return;
    const id = message.id;
    const send = (reply: IpcReply): void => channel.send(reply);
    const failed = (err: unknown): void => {
      const code = isObject(err) && typeof err.code === 'string' ? err.code : undefined;
      send({ sy, id, ok: false, message: err instanceof Error ? err.message : String(err), ...(code === undefined ? {} : { code }) });
    };
    try {
      const value = handle(message);
      if (value instanceof Promise) value.then((settled: unknown) => send({ sy, id, ok: true, value: settled }), failed);
      else send({ sy, id, ok: true, value });
    } catch (err) {
      failed(err);
    }
  });
}

/**
 * The primary's side of a question one child asks of its siblings (freshness barriers, channel
 * liveness, trace owners): a request tagged `tag` from one child is put to every other child as `askTag` (same
 * body); the answers that came within `askTimeoutMs` go to `combine`, whose result is the asking
 * child's reply. A sibling that does not answer (starting, stopping, stuck) is left out.
 */
export class SiblingQuestions<Body extends Record<string, unknown>> {
  private readonly children = new Map<IpcChannel, { requester: IpcRequester<Body>; unsubscribe: () => void }>();

  constructor(
    private readonly tag: string,
    private readonly askTag: string,
    private readonly askTimeoutMs: number,
    /** What the question is, for the error when a sibling times out. */
    private readonly what: string,
    private readonly accept: (message: Record<string, unknown>) => message is Record<string, unknown> & Body,
    private readonly combine: (answers: unknown[]) => unknown,
  ) {}

  attach(channel: IpcChannel): void {
    const requester = new IpcRequester<Body>(channel, this.askTag, this.askTimeoutMs, () => this.what);
    const unsubscribe = answerIpcRequests(channel, this.tag, this.accept, (body) => this.collect(channel, body));
    this.children.set(channel, { requester, unsubscribe });
  }

  detach(channel: IpcChannel): void {
    const child = this.children.get(channel);
    if (child === undefined) return;
    this.children.delete(channel);
    child.unsubscribe();
    child.requester.close();
  }

  private async collect(asking: IpcChannel, body: Body): Promise<unknown> {
    // The asking message goes on as it came: the requester gives it its own tag and id.
    const others = [...this.children].filter(([channel]) => channel !== asking).map(([, child]) => child.requester.request(body));
    const answers: unknown[] = [];
    for (const settled of await Promise.allSettled(others)) if (settled.status === 'fulfilled') answers.push(settled.value);
    return this.combine(answers);
  }
}
