/**
 * Checks on plain values shared by every layer (config, wire decoding, bus checks, HTTP): one
 * definition each, so a fix to one is a fix to all.
 */

/** A JSON object: not null, not an array. */
export const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** RFC 9110 token: what an HTTP method or a header name may consist of. */
export const HTTP_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
