import { once } from 'node:events';
import WebSocket from 'ws';

type Frame = Record<string, any>;

/** A worker speaking the wire protocol by hand over a real `ws` socket, for protocol-level tests. */
export class RawWorker {
  readonly frames: Frame[] = [];
  private readonly handlers = new Map<string, (data: any, frame: Frame) => unknown>();
  private waiters: { test: (f: Frame) => boolean; resolve: (f: Frame) => void }[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data: WebSocket.RawData) => {
      const frame = JSON.parse((data as Buffer).toString('utf8')) as Frame;
      const handler = frame.type === 'invokefunction' ? this.handlers.get(frame.function_id) : undefined;
      if (handler !== undefined && frame.invocation_id) {
        const result = handler(frame.data, frame);
        this.send({ type: 'invocationresult', invocation_id: frame.invocation_id, function_id: frame.function_id, result });
        return;
      }
      this.frames.push(frame);
      this.waiters = this.waiters.filter((w) => {
        if (!w.test(frame)) return true;
        w.resolve(frame);
        return false;
      });
    });
    this.closed = once(ws, 'close').then(([code, reason]) => ({ code: code as number, reason: String(reason) }));
  }

  /** `options` go to the `ws` client (e.g. `autoPong: false` for a worker that answers no ping). */
  static async connect(url: string, headers: Record<string, string> = {}, options: WebSocket.ClientOptions = {}): Promise<RawWorker> {
    const ws = new WebSocket(url, { ...options, headers });
    const worker = new RawWorker(ws);
    await Promise.race([
      once(ws, 'open'),
      worker.closed.then((c) => {
        throw new Error(`closed before open: ${c.code}`);
      }),
    ]);
    return worker;
  }

  send(frame: Frame | string): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** The first frame (already received or future) that passes `test`, within `timeoutMs`. */
  next(test: (f: Frame) => boolean, timeoutMs = 5000): Promise<Frame> {
    const seen = this.frames.find(test);
    if (seen !== undefined) {
      this.frames.splice(this.frames.indexOf(seen), 1);
      return Promise.resolve(seen);
    }
    return new Promise<Frame>((resolve, reject) => {
      const waiter = {
        test,
        resolve: (f: Frame) => {
          clearTimeout(timer);
          this.frames.splice(this.frames.indexOf(f), 1);
          resolve(f);
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`no matching frame within ${timeoutMs} ms; got ${JSON.stringify(this.frames).slice(0, 500)}`));
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  /**
   * The engine handles one socket's frames in order, so once a ping sent after some registrations
   * is answered, those registrations are in the table.
   */
  async sync(): Promise<void> {
    this.send({ type: 'ping' });
    await this.ofType('pong');
  }

  ofType(type: string, timeoutMs?: number): Promise<Frame> {
    return this.next((f) => f.type === type, timeoutMs);
  }

  /** Registers a function and its http trigger the way the SDK does (no reply expected). */
  route(functionId: string, method: string, path: string, extra: Frame = {}): string {
    const triggerId = `t-${functionId}-${Math.random().toString(36).slice(2)}`;
    this.send({ type: 'registerfunction', id: functionId });
    this.send({
      type: 'registertrigger',
      id: triggerId,
      trigger_type: 'http',
      function_id: functionId,
      config: { api_path: path, http_method: method, ...extra },
    });
    return triggerId;
  }

  /** Answers every invocation of `functionId` with `reply(data, frame)`. */
  serve(functionId: string, reply: (data: any, frame: Frame) => unknown): void {
    this.handlers.set(functionId, reply);
  }

  close(): Promise<{ code: number; reason: string }> {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close();
    return this.closed;
  }
}

export const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
