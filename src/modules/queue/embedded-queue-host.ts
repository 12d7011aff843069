import type { Logger } from 'pino';
import type { EngineConfig } from '../../config/types.js';
import { queueModuleSchema } from '../../config/queue-schema.js';
import { toQueueConfig } from '../../config/queue-config.js';
import { queuePlacement } from './queue-backend-factory.js';
import type { IpcChannel } from '../../bus/ipc-channel.js';
import { EmbeddedQueueStore } from './embedded-store.js';
import type { QueueReadyMessage, QueueReplyMessage, QueueRequestMessage } from './embedded-queue-link.js';
import { isQueueRequest } from './embedded-queue-link.js';
import type { LaneSettings, QueueJob } from './queue-job.js';

/**
 * The primary's side of the embedded queue store (docs/queue.md#embedded): the one copy, answering
 * each child's requests in arrival order. It remembers which child holds which message, so when a
 * child exits its messages are failed at once (they run again elsewhere) instead of waiting out
 * their leases.
 */
export class EmbeddedQueueHost {
  private readonly channels = new Map<IpcChannel, () => void>();
  /** Message id → the lane and the child that claimed it last. */
  private readonly holders = new Map<string, { lane: string; channel: IpcChannel }>();
  private store: EmbeddedQueueStore | undefined;

  constructor(
    private readonly dir: string | undefined,
    private readonly logger: Logger,
  ) {}

  /** Opens the store and replays its journal; throws when it cannot be read (never start empty). */
  start(): void {
    this.store ??= EmbeddedQueueStore.open(this.dir, this.logger);
  }

  attach(channel: IpcChannel): void {
    const unsubscribe = channel.onMessage((message) => {
      if (!isQueueRequest(message)) return;
      void this.answer(channel, message);
    });
    this.channels.set(channel, unsubscribe);
  }

  /** A child left: what it was running fails now and runs again elsewhere. */
  detach(channel: IpcChannel): void {
    const unsubscribe = this.channels.get(channel);
    if (unsubscribe === undefined) return;
    unsubscribe();
    this.channels.delete(channel);
    const failed: Promise<unknown>[] = [];
    const lanes = new Set<string>();
    for (const [id, holder] of this.holders) {
      if (holder.channel !== channel) continue;
      this.holders.delete(id);
      lanes.add(holder.lane);
      failed.push(this.store?.fail(holder.lane, id, 'the engine process running it exited') ?? Promise.resolve());
    }
    void Promise.allSettled(failed).then(() => {
      for (const lane of lanes) this.ready(lane, undefined);
    });
  }

  /**
   * Tells every child but `from` that a lane may have something to claim: without it a child that
   * keeps its slots busy re-claims each one it frees before the others' next poll, and they starve.
   */
  private ready(lane: string, from: IpcChannel | undefined): void {
    const message: QueueReadyMessage = { sy: 'queue-ready', lane };
    for (const channel of this.channels.keys()) if (channel !== from) channel.send(message);
  }

  private async answer(channel: IpcChannel, request: QueueRequestMessage): Promise<void> {
    let reply: QueueReplyMessage;
    try {
      reply = { sy: 'queue-reply', id: request.id, ok: true, value: await this.apply(channel, request) };
    } catch (err) {
      reply = { sy: 'queue-reply', id: request.id, ok: false, message: err instanceof Error ? err.message : String(err) };
    }
    channel.send(reply);
  }

  private async apply(channel: IpcChannel, { op, args }: QueueRequestMessage): Promise<unknown> {
    const store = this.store;
    if (store === undefined) throw new Error('the queue store is not open');
    const text = (i: number): string => String(args[i]);
    const int = (i: number): number => Number(args[i]);
    switch (op) {
      case 'enqueue': {
        const job = args[0] as QueueJob;
        await store.enqueue(job);
        this.ready(job.lane, channel);
        return undefined;
      }
      case 'claim': {
        const jobs = await store.claim(args[0] as LaneSettings, int(1), int(2));
        for (const job of jobs) this.holders.set(job.id, { lane: job.lane, channel });
        return jobs;
      }
      case 'ack': {
        this.holders.delete(text(1));
        const acked = await store.ack(text(0), text(1));
        this.ready(text(0), channel);
        return acked;
      }
      case 'fail': {
        this.holders.delete(text(1));
        const failed = await store.fail(text(0), text(1), text(2));
        this.ready(text(0), channel);
        return failed;
      }
      case 'renew':
        return store.renew(text(0), (args[1] as unknown[]).map(String), int(2));
      case 'deadLetters':
        return store.deadLetters(text(0), int(1), int(2));
      case 'redrive': {
        const count = await store.redrive(text(0));
        this.ready(text(0), channel);
        return count;
      }
      case 'redriveOne': {
        const found = await store.redriveOne(text(0), text(1));
        this.ready(text(0), channel);
        return found;
      }
      case 'discard':
        return store.discard(text(0), text(1));
      case 'stats':
        return store.stats(text(0));
      case 'lanes':
        return store.lanes();
    }
  }

  /** Flushes and closes the journal. Idempotent. */
  async close(): Promise<void> {
    for (const unsubscribe of this.channels.values()) unsubscribe();
    this.channels.clear();
    await this.store?.close();
  }
}

/** The primary's queue host when the config has `iii-queue` and its messages stay in the cluster (no Redis). */
export function embeddedQueueHost(config: EngineConfig, logger: Logger): EmbeddedQueueHost | undefined {
  const section = config.modules['iii-queue'];
  if (section === undefined) return undefined;
  const placement = queuePlacement(toQueueConfig(queueModuleSchema.parse(section)), config.cluster.redisUrl);
  return placement.kind === 'embedded' ? new EmbeddedQueueHost(placement.dir, logger) : undefined;
}
