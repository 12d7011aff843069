import WebSocket from 'ws';

/**
 * Heap after GC of another Node process, through its inspector (Chrome DevTools Protocol).
 *
 * The engine runs under the soak with `NODE_OPTIONS=--inspect=127.0.0.1:0`: every process (the
 * primary and each cluster child) opens an inspector on a loopback port and prints
 * `Debugger listening on ws://…` on stderr. A sample connects, asks for a full GC
 * (`HeapProfiler.collectGarbage`), reads `process.memoryUsage()` in that process and disconnects, so
 * no session stays attached between samples and the engine carries no soak-only code path.
 */
export const INSPECTOR_LINE = /Debugger listening on (ws:\/\/\S+)/;

export interface MemoryAfterGc {
  pid: number;
  heapUsedBytes: number;
  heapTotalBytes: number;
  externalBytes: number;
  arrayBuffersBytes: number;
}

interface CdpReply {
  id?: number;
  method?: string;
  params?: Record<string, unknown>;
  result?: { result?: { value?: unknown } };
  error?: { message: string };
}

/**
 * One short CDP session: sends `calls` one after the other (each after the previous one answered, so a
 * read follows the GC it measures), resolves with their results in order, closes.
 */
async function cdpSession(
  url: string,
  calls: { method: string; params?: Record<string, unknown> }[],
  timeoutMs: number,
  onEvent?: (event: CdpReply) => void,
): Promise<CdpReply[]> {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  try {
    return await new Promise<CdpReply[]>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`inspector ${url} did not answer within ${timeoutMs} ms`)), timeoutMs);
      const replies: CdpReply[] = [];
      const fail = (err: Error): void => {
        clearTimeout(timer);
        reject(err);
      };
      const sendNext = (): void => {
        const call = calls[replies.length];
        if (call === undefined) {
          clearTimeout(timer);
          resolve(replies);
          return;
        }
        ws.send(JSON.stringify({ id: replies.length + 1, method: call.method, params: call.params ?? {} }));
      };
      ws.on('error', fail);
      ws.on('close', () => fail(new Error(`inspector ${url} closed the session`)));
      ws.on('message', (data: WebSocket.RawData) => {
        const reply = JSON.parse((data as Buffer).toString('utf8')) as CdpReply;
        if (reply.id === undefined) return onEvent?.(reply);
        if (reply.id !== replies.length + 1) return;
        if (reply.error !== undefined) return fail(new Error(`inspector: ${reply.error.message}`));
        replies.push(reply);
        sendNext();
      });
      ws.on('open', sendNext);
    });
  } finally {
    ws.removeAllListeners('close');
    ws.on('error', () => undefined);
    ws.terminate();
  }
}

const MEMORY_EXPRESSION = 'JSON.stringify({ pid: process.pid, memory: process.memoryUsage() })';

/** Runs a full GC in the process behind `url` and returns its memory right after. */
export async function memoryAfterGc(url: string, timeoutMs = 10_000): Promise<MemoryAfterGc> {
  const replies = await cdpSession(
    url,
    [{ method: 'HeapProfiler.collectGarbage' }, { method: 'Runtime.evaluate', params: { expression: MEMORY_EXPRESSION, returnByValue: true } }],
    timeoutMs,
  );
  const value = replies[1]?.result?.result?.value;
  if (typeof value !== 'string') throw new Error(`inspector ${url}: unexpected evaluate result ${JSON.stringify(replies[1])}`);
  const parsed = JSON.parse(value) as { pid: number; memory: NodeJS.MemoryUsage };
  return {
    pid: parsed.pid,
    heapUsedBytes: parsed.memory.heapUsed,
    heapTotalBytes: parsed.memory.heapTotal,
    externalBytes: parsed.memory.external,
    arrayBuffersBytes: parsed.memory.arrayBuffers,
  };
}

/** A heap snapshot of the process behind `url` (after a full GC), as the JSON text DevTools loads. */
export async function heapSnapshot(url: string, timeoutMs = 120_000): Promise<string> {
  const chunks: string[] = [];
  await cdpSession(url, [{ method: 'HeapProfiler.collectGarbage' }, { method: 'HeapProfiler.takeHeapSnapshot', params: { reportProgress: false } }], timeoutMs, (event) => {
    const chunk = event.params?.chunk;
    if (event.method === 'HeapProfiler.addHeapSnapshotChunk' && typeof chunk === 'string') chunks.push(chunk);
  });
  return chunks.join('');
}

/**
 * The pid behind each inspector URL seen so far. URLs come from stderr lines; a URL whose process is
 * gone (a restarted child) simply stops answering and is dropped.
 */
export class InspectorDirectory {
  private readonly urls = new Set<string>();
  private readonly byPid = new Map<number, string>();

  /** Feeds one stderr line of the engine. */
  line(text: string): void {
    const match = INSPECTOR_LINE.exec(text);
    if (match?.[1] !== undefined) this.urls.add(match[1]);
  }

  /** Inspector URL of `pid`, identifying unknown URLs first (one evaluate each). */
  async urlOf(pid: number): Promise<string | undefined> {
    if (!this.byPid.has(pid)) await this.identify();
    return this.byPid.get(pid);
  }

  private async identify(): Promise<void> {
    const known = new Set(this.byPid.values());
    for (const url of this.urls) {
      if (known.has(url)) continue;
      try {
        const [reply] = await cdpSession(url, [{ method: 'Runtime.evaluate', params: { expression: 'process.pid', returnByValue: true } }], 5000);
        const pid = reply?.result?.result?.value;
        if (typeof pid === 'number') this.byPid.set(pid, url);
      } catch (err) {
        // Refused: its process is gone (a restarted child). Anything else: try again next time.
        if ((err as { code?: string }).code === 'ECONNREFUSED') this.urls.delete(url);
      }
    }
  }

  /** Forgets which URL `pid` had, after its inspector failed: the next lookup identifies it again. */
  forget(pid: number): void {
    this.byPid.delete(pid);
  }
}
