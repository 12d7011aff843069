import type { IpcChannel } from '../../bus/ipc-channel.js';
import { IpcRequester } from '../../bus/ipc-requests.js';
import type { LeaseStore } from './lease-store.js';
import type { DeadLetterView, LaneSettings, LaneStats, QueueJob } from './queue-job.js';

/**
 * The child's end of the embedded queue store, which the primary holds (embedded-queue-host.ts):
 * every LeaseStore call is one IPC request, tagged `sy: "queue"` on the channel the bus shares.
 */

export const QUEUE_OPS = ['enqueue', 'claim', 'ack', 'fail', 'renew', 'deadLetters', 'redrive', 'redriveOne', 'discard', 'stats', 'lanes'] as const;
export type QueueOp = (typeof QUEUE_OPS)[number];

export interface QueueRequestMessage {
  sy: 'queue';
  id: number;
  op: QueueOp;
  args: unknown[];
}

/** Primary → the other children: a lane may have work to claim or a free slot (see LeaseStore.onReady). */
export interface QueueReadyMessage {
  sy: 'queue-ready';
  lane: string;
}

export interface QueueReplyMessage {
  sy: 'queue-reply';
  id: number;
  ok: boolean;
  value?: unknown;
  message?: string;
}

function isObject(message: unknown): message is Record<string, unknown> {
  return typeof message === 'object' && message !== null;
}

export function isQueueRequest(message: unknown): message is QueueRequestMessage {
  return isObject(message) && message.sy === 'queue' && typeof message.id === 'number' && QUEUE_OPS.includes(message.op as QueueOp) && Array.isArray(message.args);
}

function isQueueReady(message: unknown): message is QueueReadyMessage {
  return isObject(message) && message.sy === 'queue-ready' && typeof message.lane === 'string';
}

/** A request the primary has not answered within this fails (the consumer retries; leases cover the rest). */
const REQUEST_TIMEOUT_MS = 5_000;

export class IpcQueueStore implements LeaseStore {
  /** Requests and their answers (`sy: "queue"` / `"queue-reply"`): the bus's one request/answer helper. */
  private readonly requests: IpcRequester<{ op: QueueOp; args: unknown[] }>;
  private readonly unsubscribe: () => void;
  private readonly readyListeners: ((lane: string) => void)[] = [];
  private closed = false;

  constructor(channel: IpcChannel) {
    this.requests = new IpcRequester(channel, 'queue', REQUEST_TIMEOUT_MS, (body) => `queue ${body.op}`);
    this.unsubscribe = channel.onMessage((message) => {
      if (isQueueReady(message)) for (const listener of this.readyListeners) listener(message.lane);
    });
  }

  onReady(listener: (lane: string) => void): void {
    this.readyListeners.push(listener);
  }

  private request<T>(op: QueueOp, args: unknown[]): Promise<T> {
    return this.requests.request({ op, args }) as Promise<T>;
  }

  enqueue(job: QueueJob): Promise<void> {
    return this.request('enqueue', [job]);
  }

  claim(lane: LaneSettings, max: number, leaseMs: number): Promise<QueueJob[]> {
    return this.request('claim', [lane, max, leaseMs]);
  }

  ack(lane: string, id: string): Promise<boolean> {
    return this.request('ack', [lane, id]);
  }

  fail(lane: string, id: string, error: string): Promise<'retry' | 'dead' | 'lost'> {
    return this.request('fail', [lane, id, error]);
  }

  renew(lane: string, ids: readonly string[], leaseMs: number): Promise<void> {
    return this.request('renew', [lane, ids, leaseMs]);
  }

  deadLetters(lane: string, offset: number, limit: number): Promise<DeadLetterView[]> {
    return this.request('deadLetters', [lane, offset, limit]);
  }

  redrive(lane: string): Promise<number> {
    return this.request('redrive', [lane]);
  }

  redriveOne(lane: string, id: string): Promise<boolean> {
    return this.request('redriveOne', [lane, id]);
  }

  discard(lane: string, id: string): Promise<boolean> {
    return this.request('discard', [lane, id]);
  }

  stats(lane: string): Promise<LaneStats> {
    return this.request('stats', [lane]);
  }

  lanes(): Promise<string[]> {
    return this.request('lanes', []);
  }

  /** Fails what is in flight and stops listening. Idempotent. */
  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.requests.close();
      this.unsubscribe();
    }
    return Promise.resolve();
  }
}
