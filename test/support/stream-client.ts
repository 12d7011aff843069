import { once } from 'node:events';
import WebSocket from 'ws';

export type StreamFrame = {
  type: string;
  timestamp: number;
  streamName: string;
  groupId: string;
  id: string | null;
  event: { type: string; data?: unknown; event?: { type: string; data: unknown } };
};

/**
 * A stream client speaking iii's client protocol by hand over a real `ws` socket (port 3112): join,
 * leave, and every frame the engine sends, kept in order, with waits that have deadlines.
 */
export class RawStreamClient {
  readonly frames: StreamFrame[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  private waiters: (() => void)[] = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data: WebSocket.RawData) => {
      this.frames.push(JSON.parse((data as Buffer).toString('utf8')) as StreamFrame);
      for (const wake of this.waiters.splice(0)) wake();
    });
    ws.on('error', () => undefined);
    this.closed = once(ws, 'close').then(([code, reason]) => ({ code: code as number, reason: String(reason) }));
  }

  static async connect(url: string, headers: Record<string, string> = {}): Promise<RawStreamClient> {
    const client = new RawStreamClient(new WebSocket(url, { headers }));
    await once(client.ws, 'open');
    return client;
  }

  join(subscriptionId: string, streamName: string, groupId: string, id?: string): void {
    this.ws.send(JSON.stringify({ type: 'join', data: { subscriptionId, streamName, groupId, ...(id === undefined ? {} : { id }) } }));
  }

  leave(subscriptionId: string, streamName: string, groupId: string, id?: string): void {
    this.ws.send(JSON.stringify({ type: 'leave', data: { subscriptionId, streamName, groupId, ...(id === undefined ? {} : { id }) } }));
  }

  /** The first frame (received already or later) passing `test`, within `timeoutMs`. */
  async next(test: (frame: StreamFrame) => boolean, timeoutMs = 10_000, what = 'stream frame'): Promise<StreamFrame> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.frames.find(test);
      if (found !== undefined) return found;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${what} within ${timeoutMs} ms; got ${JSON.stringify(this.frames).slice(0, 800)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 250));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Waits for the sync of a join; returns its data. */
  async synced(groupId: string, timeoutMs?: number): Promise<unknown> {
    return (await this.next((f) => f.event.type === 'sync' && f.groupId === groupId, timeoutMs, `sync of ${groupId}`)).event.data;
  }

  close(): Promise<{ code: number; reason: string }> {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close();
    else if (this.ws.readyState === WebSocket.CONNECTING) this.ws.terminate();
    return this.closed;
  }
}
