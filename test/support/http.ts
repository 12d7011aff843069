import { request } from 'undici';

export interface SimpleResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json<T = any>(): T;
}

export async function http(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<SimpleResponse> {
  const res = await request(url, {
    method: init.method ?? 'GET',
    headers: init.headers,
    body: init.body,
    headersTimeout: 20_000,
    bodyTimeout: 20_000,
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    headers: res.headers,
    text,
    json: () => JSON.parse(text),
  };
}

/** Polls until `accept(status)` holds, within `timeoutMs` (routes appear asynchronously as workers register). */
export async function waitForStatus(
  url: string,
  accept: (status: number) => boolean,
  init: Parameters<typeof http>[1] = {},
  timeoutMs = 10_000,
): Promise<SimpleResponse> {
  const deadline = Date.now() + timeoutMs;
  let last: SimpleResponse | undefined;
  for (;;) {
    last = await http(url, init);
    if (accept(last.status)) return last;
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting on ${url}: last status ${last.status} ${last.text.slice(0, 200)}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Polls until `runs` requests in a row, each on a fresh connection, answer `accept`: the primary deals
 * connections to the children round-robin, so a run of 2 × processes has asked every child.
 */
export async function waitForEveryProcess(
  url: string,
  processes: number,
  accept: (status: number) => boolean = (s) => s === 200,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let run = 0;
  for (;;) {
    const res = await http(url, { headers: { connection: 'close' } });
    run = accept(res.status) ? run + 1 : 0;
    if (run >= processes * 2) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for every process to answer ${url}: last status ${res.status}`);
    if (run === 0) await new Promise((r) => setTimeout(r, 25));
  }
}
