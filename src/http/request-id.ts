import { randomUuid } from '../random-ids.js';

/** An incoming id is reused only when it is short printable ASCII, so it is safe in logs and headers. */
const ACCEPTABLE_ID = /^[\x21-\x7e]{1,128}$/;

export function resolveRequestId(incoming: string | string[] | undefined): string {
  const value = Array.isArray(incoming) ? incoming[0] : incoming;
  return value !== undefined && ACCEPTABLE_ID.test(value) ? value : randomUuid();
}
