import type { LoadOptions } from './load.js';
import { CONNECTIONS, DURATION_MS, SERVED_BY, WARMUP_MS } from './options.js';

/** What the load generator sends: request shapes and the load options for one subject. */
export interface RequestSpec {
  path: string;
  method?: string;
  body?: Buffer;
  headers?: Record<string, string>;
  /** Keep-alive connections of the closed loop; default CONNECTIONS (1: one request at a time). */
  connections?: number;
}

/** A JSON document of realistic shape (an array of records), at least `bytes` long once serialised. */
export function jsonBody(bytes: number): Buffer {
  const items: unknown[] = [];
  const doc = { order: 'A-1029', customer: { id: 7, name: 'Ann Example', tier: 'gold' }, items };
  while (JSON.stringify(doc).length < bytes) {
    const i = items.length;
    items.push({ sku: `SKU-${1000 + i}`, name: `item number ${i}`, qty: (i % 5) + 1, price: 9.99 + i, tags: ['a', 'b'] });
  }
  return Buffer.from(JSON.stringify(doc));
}

export const HELLO: RequestSpec = { path: '/bench/hello' };
export const bodySpec = (bytes: number): RequestSpec => ({
  path: '/bench/echo',
  method: 'POST',
  body: jsonBody(bytes),
  headers: { 'content-type': 'application/json' },
});
export const BODY_1K = bodySpec(1024);
export const BODY_64K = bodySpec(64 * 1024);

export const loadOptions = (origin: string, spec: RequestSpec, extra: Partial<LoadOptions> = {}): LoadOptions => ({
  url: origin + spec.path,
  connections: spec.connections ?? CONNECTIONS,
  durationMs: DURATION_MS,
  warmupMs: WARMUP_MS,
  ...(spec.method === undefined ? {} : { method: spec.method }),
  ...(spec.body === undefined ? {} : { body: spec.body }),
  ...(spec.headers === undefined ? {} : { headers: spec.headers }),
  ...extra,
});

export const FORWARDED_MARK = { header: SERVED_BY, test: (value: string) => value.endsWith('forwarded=true') };
