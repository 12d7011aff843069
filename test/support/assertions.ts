import { expect } from 'vitest';
import type { SimpleResponse } from './http.js';

/**
 * Asserts the engine's error envelope `{"error":{"code","message"},"request_id"}` (architecture.md,
 * "Behaviour where the spec says not shown") with exactly these keys, plus `extra` keys when given,
 * and that the body's request id is the one in the response header. Returns the parsed body.
 */
export function expectErrorEnvelope(
  res: Pick<SimpleResponse, 'status' | 'headers' | 'text'>,
  status: number,
  code: string,
  options: { requestIdHeader?: string; extraKeys?: string[] } = {},
): { error: { code: string; message: string }; request_id: string } & Record<string, unknown> {
  expect({ status: res.status, text: res.text }).toMatchObject({ status });
  expect(res.headers['content-type']).toBe('application/json');
  const body = JSON.parse(res.text) as { error: { code: string; message: string }; request_id: string } & Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(['error', 'request_id', ...(options.extraKeys ?? [])].sort());
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message']);
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe('string');
  expect(body.error.message.length).toBeGreaterThan(0);
  expect(typeof body.request_id).toBe('string');
  expect(body.request_id).toBe(res.headers[options.requestIdHeader ?? 'x-request-id']);
  return body;
}
