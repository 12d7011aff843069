import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import type { ChannelDirection, ChannelLimits } from './channel.js';
import { Channel } from './channel.js';
import { ChannelBudget } from './channel-budget.js';

/** A channel end as iii-sdk receives it: `channel_id`, `access_key`, `direction`, as iii names them. */
export interface ChannelRef {
  channel_id: string;
  access_key: string;
  direction: ChannelDirection;
}

/** iii's defaults: a channel buffers 64 items (engine::channels::create may ask for up to 1,024). */
export const DEFAULT_BUFFER_ITEMS = 64;
export const MAX_BUFFER_ITEMS = 1024;
/** Whatever the item count, a channel never queues more than this many bytes. */
const MAX_QUEUED_BYTES = 1024 * 1024;
/** Default of `max_channel_buffer_bytes`: what all channels of one process may hold together. */
export const DEFAULT_CHANNEL_BUFFER_BYTES = 64 * 1024 * 1024;
/** A channel an end of which was never claimed is removed after this long (iii: 5 minutes). */
export const UNCLAIMED_TTL_MS = 5 * 60_000;
const SWEEP_INTERVAL_MS = 60_000;

/** The queue bounds of a channel buffering `bufferItems` items (clamped to 1..MAX_BUFFER_ITEMS). */
export function channelLimits(bufferItems = DEFAULT_BUFFER_ITEMS): ChannelLimits {
  if (bufferItems === DEFAULT_BUFFER_ITEMS) return DEFAULT_LIMITS;
  return { maxQueuedItems: Math.min(Math.max(1, bufferItems), MAX_BUFFER_ITEMS), maxQueuedBytes: MAX_QUEUED_BYTES };
}

/** Every request's two channels have these: one frozen object, not two new ones per request. */
const DEFAULT_LIMITS: ChannelLimits = Object.freeze({ maxQueuedItems: DEFAULT_BUFFER_ITEMS, maxQueuedBytes: MAX_QUEUED_BYTES });

/** The owner tag of a process: the first 12 hex digits of a hash of its peer id. */
export function ownerTag(peerId: string): string {
  return createHash('sha256').update(peerId).digest('hex').slice(0, 12);
}

/** Channel ids are `<owner tag>-<sequence>`: any process can tell which process holds a channel. */
export function ownerTagOfChannel(channelId: string): string | undefined {
  const dash = channelId.indexOf('-');
  return dash === 12 ? channelId.slice(0, 12) : undefined;
}

const keysEqual = (a: string, b: string): boolean => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

export type ClaimResult = { ok: true; channel: Channel } | { ok: false; reason: 'not_found' | 'in_use' };

/** Makes a reserved channel when it is first needed (an HTTP request's RequestChannels makes both of its own). */
export interface ChannelMaker {
  makeChannel(id: string): Channel;
}

/**
 * The two ids an HTTP request reserves (`reservePair`), with their key and maker: one entry for both.
 * The maker is dropped as the reservation ends (see `reserved`).
 */
export interface Reservation {
  /** The first id's sequence number: the entry's key in `reserved`. */
  readonly sequence: number;
  readonly first: string;
  readonly second: string;
  readonly key: string;
  maker: ChannelMaker | undefined;
  /** Which ids are still only reserved: FIRST, SECOND, both or neither. */
  live: number;
}
const FIRST = 1;
const SECOND = 2;

export interface CreateChannelOptions {
  bufferItems?: number;
  /** Bound on the bytes the writer may push (streamed request bodies). */
  maxBytesIn?: number;
  /**
   * Expires when an end stays unclaimed for the TTL (engine::channels::create). Request channels do
   * not: they are destroyed with their request.
   */
  expires?: boolean;
  /** Called once when the channel is gone (both ends done, torn down or expired). */
  onGone?: () => void;
  /** Its binary items are one byte stream whose boundaries mean nothing (Channel.byteStream). */
  byteStream?: boolean;
}

/**
 * The channels this process holds, by id. Access is by id and key; each end is claimed once.
 * Channels tied to an HTTP request are destroyed with it; the others (engine::channels::create)
 * expire when an end stays unclaimed for UNCLAIMED_TTL_MS.
 */
export class ChannelRegistry {
  readonly tag: string;
  private readonly channels = new Map<string, { channel: Channel; createdAt: number; expires: boolean }>();
  /**
   * Ids handed out with their key before their channel exists (an HTTP request's channels, which most
   * workers never open): the first claim of one makes the channel, through its maker.
   *
   * An entry's maker is cut before the entry is deleted: the maker holds the whole request (its
   * response, headers, body). When V8 rehashes a Map whose table is in the old generation, the new
   * table goes there too, and the table it replaces keeps pointing at every entry it held until the next
   * full GC; an old-space object pointing at young ones keeps them through every scavenge. A Map that
   * lives as long as the process and turns over two entries per request thus had each request's
   * objects promoted to the old generation: 2.9 KB a request with the maker left on the entry, 0.9 KB
   * with it cut, and four times as many full GCs (docs/performance.md, issue 26).
   *
   * A request's two ids are one entry, keyed by the first one's sequence number (the second's is the
   * next): one insert and one delete per request, with a number to hash, not two of each with a new
   * string (issue 26). A claim finds the entry from the id it names.
   */
  private readonly reserved = new Map<number, Reservation>();
  /** Ids reserved and not yet made or released. */
  private reservedIds = 0;
  private sequence = 0;
  private sweepTimer: NodeJS.Timeout | undefined;
  /** What this process's channels hold together, bounded by `max_channel_buffer_bytes`. */
  readonly budget: ChannelBudget;

  constructor(
    peerId: string,
    private readonly logger: Logger,
    private readonly ttlMs = UNCLAIMED_TTL_MS,
    maxBufferedBytes = DEFAULT_CHANNEL_BUFFER_BYTES,
  ) {
    this.tag = ownerTag(peerId);
    this.budget = new ChannelBudget(maxBufferedBytes);
  }

  /** Channels held, counting reserved ones (each is a channel a worker may still open). */
  get size(): number {
    return this.channels.size + this.reservedIds;
  }

  /** Bytes this process's channels hold (queued, or handed to a reader and not flushed). */
  get bufferedBytes(): number {
    return this.budget.held;
  }

  /** A new channel and its key; `key` may be shared by the two channels of one request. */
  create(options: CreateChannelOptions = {}, key: string = randomUUID(), id: string = this.nextId()): Channel {
    const limits = channelLimits(options.bufferItems);
    const onGone = options.onGone;
    const channel = new Channel(
      id,
      key,
      limits,
      (done) => {
        this.channels.delete(done.id);
        onGone?.();
      },
      options.maxBytesIn,
      this.budget,
      options.byteStream,
    );
    this.channels.set(id, { channel, createdAt: Date.now(), expires: options.expires ?? false });
    if (options.expires === true) this.startSweeping();
    return channel;
  }

  /**
   * Two ids for channels with `key` that are made only when an end of one is first claimed:
   * `maker.makeChannel(id)` then creates it (with `create(..., key, id)`) and attaches what the engine
   * holds of it. Until then the pair costs one map entry. `release` drops an id unclaimed.
   */
  reservePair(key: string, maker: ChannelMaker): Reservation {
    const sequence = ++this.sequence;
    ++this.sequence;
    const reservation: Reservation = { sequence, first: this.idOf(sequence), second: this.idOf(sequence + 1), key, maker, live: FIRST | SECOND };
    this.reserved.set(sequence, reservation);
    this.reservedIds += 2;
    return reservation;
  }

  /** Makes a reserved channel now (the engine needs it itself); undefined when it is gone. */
  materialise(id: string): Channel | undefined {
    const entry = this.reservationOf(id);
    if (entry === undefined) return this.channels.get(id)?.channel;
    const maker = entry.maker as ChannelMaker;
    this.end(entry, id === entry.first ? FIRST : SECOND);
    return maker.makeChannel(id);
  }

  /** Drops a reserved id never claimed: a later claim of it finds nothing. */
  release(reservation: Reservation, id: string): void {
    const which = id === reservation.first ? FIRST : id === reservation.second ? SECOND : 0;
    if ((reservation.live & which) !== 0) this.end(reservation, which);
  }

  /** One id of a pair is no longer reserved; the entry goes with the last one (its maker cut first). */
  private end(reservation: Reservation, which: number): void {
    reservation.live &= ~which;
    this.reservedIds--;
    if (reservation.live !== 0) return;
    reservation.maker = undefined;
    this.reserved.delete(reservation.sequence);
  }

  /** The pair that still holds `id` reserved, if any. */
  private reservationOf(id: string): Reservation | undefined {
    const prefix = this.tag.length + 1;
    if (id.length <= prefix || !id.startsWith(this.tag) || id.charCodeAt(prefix - 1) !== 0x2d) return undefined;
    const sequence = parseInt(id.slice(prefix), 36);
    if (!Number.isSafeInteger(sequence)) return undefined;
    const asFirst = this.reserved.get(sequence);
    if (asFirst !== undefined && asFirst.first === id) return (asFirst.live & FIRST) !== 0 ? asFirst : undefined;
    const asSecond = this.reserved.get(sequence - 1);
    if (asSecond !== undefined && asSecond.second === id) return (asSecond.live & SECOND) !== 0 ? asSecond : undefined;
    return undefined;
  }

  /** The ref a worker gets for one end of a channel. */
  static ref(channel: Channel, direction: ChannelDirection): ChannelRef {
    return { channel_id: channel.id, access_key: channel.key, direction };
  }

  /** Checks id and key and that the end is still free; the caller then attaches to it. */
  claim(id: string, key: string, direction: ChannelDirection): ClaimResult {
    const reservation = this.reservationOf(id);
    if (reservation !== undefined) {
      if (!keysEqual(reservation.key, key)) return { ok: false, reason: 'not_found' };
      this.materialise(id);
    }
    const entry = this.channels.get(id);
    if (entry === undefined || !keysEqual(entry.channel.key, key)) return { ok: false, reason: 'not_found' };
    if (entry.channel.isClaimed(direction) || entry.channel.isSettled) return { ok: false, reason: 'in_use' };
    return { ok: true, channel: entry.channel };
  }

  /** Destroys every expiring channel with an end still unclaimed after the TTL. */
  sweep(now = Date.now()): number {
    let removed = 0;
    for (const { channel, createdAt, expires } of [...this.channels.values()]) {
      if (!expires || now - createdAt < this.ttlMs) continue;
      if (channel.isClaimed('read') && channel.isClaimed('write')) continue;
      channel.destroy('channel expired before both ends connected');
      removed++;
    }
    if (removed > 0) this.logger.info({ removed }, 'unclaimed channels expired');
    return removed;
  }

  /** Destroys every channel (shutdown). */
  close(): void {
    clearInterval(this.sweepTimer);
    this.sweepTimer = undefined;
    this.reserved.clear();
    this.reservedIds = 0;
    for (const { channel } of [...this.channels.values()]) channel.destroy('engine shutting down');
  }

  private nextId(): string {
    return this.idOf(++this.sequence);
  }

  private idOf(sequence: number): string {
    return `${this.tag}-${sequence.toString(36)}`;
  }

  private startSweeping(): void {
    if (this.sweepTimer !== undefined) return;
    this.sweepTimer = setInterval(() => this.sweep(), Math.min(SWEEP_INTERVAL_MS, this.ttlMs));
    this.sweepTimer.unref();
  }
}
