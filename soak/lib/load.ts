import { Pool } from 'undici';

/**
 * Steady, paced load for the soak: `connections` keep-alive connections, each running one request at a
 * time on a fixed rhythm so that the whole pool sends about `rps` requests per second (a moderate rate
 * on purpose: the soak looks for what accumulates, not for the throughput ceiling). Every answer is
 * classified by `kind` (label, status, error code) and checked against what its label expects.
 */
export interface SoakRequest {
  /** What the request exercises: `hello`, `echo`, `raw`, `missing`, `throw`, `churn`, `departed`. */
  label: string;
  method: 'GET' | 'POST';
  path: string;
  body?: Buffer;
}

/** What a label's answer means: `ok` (as expected), `race` (allowed by churn timing) or `unexpected`. */
export type Outcome = 'ok' | 'race' | 'unexpected';

export interface Tally {
  requests: number;
  ok: number;
  race: number;
  unexpected: number;
  transportErrors: number;
  /** `label status code` → how many, and what they were, e.g. `throw 500 invocation_failed`. */
  byKind: Map<string, { count: number; outcome: Outcome | 'transport' }>;
}

export function newTally(): Tally {
  return { requests: 0, ok: 0, race: 0, unexpected: 0, transportErrors: 0, byKind: new Map() };
}

function errorCode(text: string): string | undefined {
  try {
    const parsed = JSON.parse(text) as { error?: { code?: unknown } };
    return typeof parsed.error?.code === 'string' ? parsed.error.code : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Classifies one answer of a soak request. Churn answers other than 200 are races when they are what a
 * worker leaving around the request can cause: the call was cut (502 WORKER_DISCONNECTED), or it
 * waited through the reconnect grace for a worker that did not come back (503 FUNCTION_UNAVAILABLE, or
 * 500 MIDDLEWARE_FAILED from the worker's scoped middleware), or the route was already gone (404).
 */
export function classify(req: SoakRequest, status: number, text: string): { kind: string; outcome: Outcome } {
  const code = status >= 400 ? errorCode(text) : undefined;
  const kind = `${req.label} ${status}${code === undefined ? '' : ` ${code}`}`;
  const leaving =
    (status === 404 && code === 'NOT_FOUND') ||
    (status === 502 && code === 'WORKER_DISCONNECTED') ||
    (status === 500 && code === 'MIDDLEWARE_FAILED') ||
    (status === 503 && code === 'FUNCTION_UNAVAILABLE');
  let outcome: Outcome = 'unexpected';
  switch (req.label) {
    case 'hello':
    case 'raw':
      if (status === 200 && text === '{"ok":true}') outcome = 'ok';
      break;
    case 'echo':
      if (status === 200 && req.body !== undefined && text === req.body.toString('utf8')) outcome = 'ok';
      break;
    case 'missing':
      if (status === 404 && code === 'NOT_FOUND') outcome = 'ok';
      break;
    case 'throw':
      if (status === 500 && code === 'invocation_failed') outcome = 'ok';
      break;
    case 'churn':
      if (status === 200) outcome = 'ok';
      else if (leaving) outcome = 'race';
      break;
    case 'departed':
      // Sent after its only worker left (docs/reliability.md#reconnect-grace): within the grace the
      // call waits, then 503 FUNCTION_UNAVAILABLE, or 500 MIDDLEWARE_FAILED when the worker's own
      // scoped middleware runs first (an unserved middleware fails the request, docs/middleware.md);
      // NOT_FOUND once the route is gone.
      if ((status === 404 && code === 'NOT_FOUND') || (status === 503 && code === 'FUNCTION_UNAVAILABLE') || (status === 500 && code === 'MIDDLEWARE_FAILED')) {
        outcome = 'ok';
      }
      break;
  }
  return { kind, outcome };
}

function count(tally: Tally, kind: string, outcome: Outcome | 'transport'): void {
  tally.requests++;
  if (outcome === 'transport') tally.transportErrors++;
  else tally[outcome]++;
  const entry = tally.byKind.get(kind);
  if (entry === undefined) tally.byKind.set(kind, { count: 1, outcome });
  else entry.count++;
}

/** Sends `req` on `pool` and records the answer in `tally`. Never throws. */
export async function send(pool: Pool, req: SoakRequest, tally: Tally, timeoutMs = 20_000): Promise<void> {
  try {
    const res = await pool.request({
      path: req.path,
      method: req.method,
      body: req.body,
      headers: req.body === undefined ? {} : { 'content-type': 'application/json' },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const text = await res.body.text();
    const { kind, outcome } = classify(req, res.statusCode, text);
    count(tally, kind, outcome);
  } catch (err) {
    count(tally, `${req.label} transport ${(err as { code?: string }).code ?? (err as Error).name}`, 'transport');
  }
}

export interface PacedLoad {
  tally: Tally;
  stop(): Promise<void>;
}

/** Starts `connections` paced loops on one keep-alive pool; `next()` picks each request. */
export function startPacedLoad(origin: string, connections: number, rps: number, next: () => SoakRequest): PacedLoad {
  const pool = new Pool(origin, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const tally = newTally();
  const intervalMs = (connections * 1000) / rps;
  let stopping = false;
  const loops = Array.from({ length: connections }, async (_, i) => {
    // Spread the loops over one interval so the requests do not leave in bursts.
    let due = performance.now() + (intervalMs * i) / connections;
    while (!stopping) {
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      if (stopping) break;
      await send(pool, next(), tally);
      due = Math.max(due + intervalMs, performance.now() - intervalMs);
    }
  });
  return {
    tally,
    stop: async () => {
      stopping = true;
      await Promise.all(loops);
      await pool.close();
    },
  };
}

/** A JSON document of at least `bytes` bytes once serialised (an array of records). */
export function jsonBody(bytes: number): Buffer {
  const items: unknown[] = [];
  const doc = { order: 'S-1', items };
  while (JSON.stringify(doc).length < bytes) {
    const i = items.length;
    items.push({ sku: `SKU-${1000 + i}`, name: `item number ${i}`, qty: (i % 5) + 1, price: 9.99 + i });
  }
  return Buffer.from(JSON.stringify(doc));
}
