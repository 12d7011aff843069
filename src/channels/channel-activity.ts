import { performance } from 'node:perf_hooks';

/**
 * When each channel last moved data through a worker's channel socket on this process
 * (docs/reliability.md#frozen-or-half-open-worker-heartbeat). A worker whose event loop is busy
 * writing a stream may answer no ping for seconds while its channel socket keeps moving data; the
 * heartbeat asks this record (here and, through the primary, on the sibling processes: the socket
 * can land on any of them) before it drops such a worker as frozen.
 *
 * Per frame it costs one clock read and a field write on an object the socket's end holds; nothing
 * crosses a process boundary until someone asks. A channel's entry outlives its sockets by
 * `retainMs` (a worker that just finished its stream still counts as alive for a timeout), and at
 * most `maxClosed` such entries are kept.
 */

/** What one worker-facing channel socket reports. */
export interface ActivityMark {
  /** Data moved on the socket (a frame from the worker, or a frame handed to it to read). */
  moved(): void;
  /** The socket is gone. Idempotent. */
  closed(): void;
}

/** The most recent data on a worker's channels: how long ago, and whether on this process's sockets or a sibling's. */
export interface ChannelSighting {
  agoMs: number;
  where: 'here' | 'sibling';
}

/** How the heartbeat looks up a silent worker's channel traffic (src/cluster/channel-liveness.ts). */
export interface ChannelLiveness {
  lastMoved(channelIds: readonly string[], withinMs: number): Promise<ChannelSighting | undefined>;
}

interface Entry {
  lastAt: number;
  open: number;
}

/** Default bound on the entries kept for channels whose sockets are gone. */
const MAX_CLOSED = 10_000;

export class ChannelActivity {
  private readonly open = new Map<string, Entry>();
  /** Channels with no socket left here, oldest close first: channel id → when data last moved. */
  private readonly recent = new Map<string, { lastAt: number; closedAt: number }>();

  constructor(
    private readonly retainMs: number,
    private readonly maxClosed = MAX_CLOSED,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Channels with an open worker socket here, and channels recently closed (for tests and metrics). */
  get size(): number {
    return this.open.size + this.recent.size;
  }

  /** A worker's socket joined `channelId` here: opening it counts as activity too. */
  track(channelId: string): ActivityMark {
    const at = this.now();
    this.prune(at);
    let entry = this.open.get(channelId);
    if (entry === undefined) {
      entry = { lastAt: at, open: 0 };
      this.recent.delete(channelId);
      this.open.set(channelId, entry);
    } else {
      entry.lastAt = at;
    }
    entry.open++;
    const held = entry;
    let done = false;
    return {
      moved: () => {
        held.lastAt = this.now();
      },
      closed: () => {
        if (done) return;
        done = true;
        if (--held.open > 0 || this.open.get(channelId) !== held) return;
        this.open.delete(channelId);
        const at = this.now();
        this.recent.set(channelId, { lastAt: held.lastAt, closedAt: at });
        this.prune(at);
      },
    };
  }

  /**
   * How many ms ago any of `channelIds` last moved data through a worker's socket here; undefined
   * when none of them did within the retention.
   */
  lastMovedAgo(channelIds: Iterable<string>): number | undefined {
    const now = this.now();
    this.prune(now);
    let latest = Number.NEGATIVE_INFINITY;
    for (const id of channelIds) {
      const at = this.open.get(id)?.lastAt ?? this.recent.get(id)?.lastAt;
      if (at !== undefined && at > latest) latest = at;
    }
    return latest === Number.NEGATIVE_INFINITY ? undefined : Math.max(0, now - latest);
  }

  private prune(now: number): void {
    for (const [id, { closedAt }] of this.recent) {
      if (now - closedAt <= this.retainMs && this.recent.size <= this.maxClosed) break;
      this.recent.delete(id);
    }
  }
}
