/**
 * Steady closed-loop load: `connections` undici clients (one connection, one request in flight each),
 * split across the nodes' HTTP ports. Every request carries a unique token in its JSON body and its
 * query; the answer must echo both and the digest the replica computes from it. A request without an
 * answer within `cutoffMs` (well above the engine's deadline) is aborted and recorded as hung.
 */
import { createHash } from 'node:crypto';
import { Client, errors } from 'undici';
import type { RequestRecord } from './checker.js';
import { ROUTE } from './cluster.js';

/** Same as DIGEST_ROUNDS in chaos/worker.mjs. */
const DIGEST_ROUNDS = 32;
/** After a client-side error, a short pause so a refused port is not hammered in a tight loop. */
const ERROR_PAUSE_MS = 25;

export function digestOf(token: string): string {
  let digest = token;
  for (let i = 0; i < DIGEST_ROUNDS; i++) digest = createHash('sha256').update(digest).digest('hex');
  return digest.slice(0, 16);
}

export interface LoadTarget {
  node: string;
  url: string;
}

export interface LoadOptions {
  targets: readonly LoadTarget[];
  connections: number;
  cutoffMs: number;
  /** Milliseconds since the run started (the clock of every record). */
  now: () => number;
  onRecord: (record: RequestRecord) => void;
}

interface EchoBody {
  token?: unknown;
  query_token?: unknown;
  digest?: unknown;
  replica?: unknown;
  error?: { code?: unknown };
}

export class LoadGenerator {
  private running = false;
  private loops: Promise<void>[] = [];
  private readonly clients: Client[] = [];
  /** Every token issued so far: a body carrying one of them that is not ours is a crossed body. */
  private readonly issued = new Set<string>();
  inFlight = 0;

  constructor(private readonly options: LoadOptions) {}

  start(): void {
    this.running = true;
    const { targets, connections } = this.options;
    for (let conn = 0; conn < connections; conn++) {
      const target = targets[conn % targets.length] as LoadTarget;
      const client = new Client(target.url, {
        pipelining: 1,
        keepAliveTimeout: 30_000,
        headersTimeout: this.options.cutoffMs + 1000,
        bodyTimeout: this.options.cutoffMs + 1000,
      });
      this.clients.push(client);
      this.loops.push(this.loop(conn, target, client));
    }
  }

  /** Stops issuing requests and waits for those in flight (each bounded by the cutoff). */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    await Promise.allSettled(this.clients.map((c) => c.close()));
  }

  private async loop(conn: number, target: LoadTarget, client: Client): Promise<void> {
    for (let seq = 0; this.running; seq++) {
      const token = `c${conn}-${seq}-${Math.random().toString(36).slice(2, 8)}`;
      const record = await this.one(conn, target, client, token);
      this.options.onRecord(record);
      if (record.status === undefined && this.running) await new Promise((r) => setTimeout(r, ERROR_PAUSE_MS));
    }
  }

  private async one(conn: number, target: LoadTarget, client: Client, token: string): Promise<RequestRecord> {
    const { now, cutoffMs } = this.options;
    this.issued.add(token);
    const record: RequestRecord = { type: 'request', token, conn, node: target.node, start: now(), end: 0, tokenOk: false, crossed: false, hung: false };
    const cutoff = AbortSignal.timeout(cutoffMs);
    this.inFlight++;
    try {
      const res = await client.request({
        path: `${ROUTE.path}?token=${encodeURIComponent(token)}`,
        method: ROUTE.method,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token }),
        signal: cutoff,
      });
      const text = await res.body.text();
      record.status = res.statusCode;
      let body: EchoBody | undefined;
      try {
        body = JSON.parse(text) as EchoBody;
      } catch {
        body = undefined;
      }
      if (res.statusCode === 200) {
        record.tokenOk = body?.token === token && body.query_token === token && body.digest === digestOf(token);
        const echoed = [body?.token, body?.query_token].find((t) => typeof t === 'string' && t !== token) as string | undefined;
        record.crossed = echoed !== undefined && this.issued.has(echoed);
        if (typeof body?.replica === 'string') record.replica = body.replica;
      } else if (typeof body?.error?.code === 'string') {
        record.code = body.error.code;
      }
    } catch (err) {
      const error = err as Error & { code?: string };
      if (cutoff.aborted || error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError) {
        record.hung = true;
        record.err = 'CUTOFF';
      } else {
        record.err = error.code ?? error.name;
      }
    } finally {
      this.inFlight--;
    }
    record.end = now();
    return record;
  }
}
