import { randomFillSync } from 'node:crypto';

/**
 * Random UUIDs for the request path (request ids, invocation ids, channel keys), from a pooled
 * buffer of CSPRNG bytes: one crypto call per 256 ids, as node:crypto's randomUUID does.
 *
 * randomUUID builds its text from 20 concatenated pieces, ~0.6 KB of short-lived strings per id that
 * V8 flattens again on first use; with three ids per HTTP request that was a measurable part of the
 * engine's garbage (docs/performance.md, issue 26). These write the text into a scratch buffer and
 * read it out as one flat string. Same format, same randomness (122 random bits per uuid).
 */
const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let offset = POOL_BYTES;
const HEX = Buffer.from('0123456789abcdef', 'latin1');
const scratch = Buffer.alloc(36);

/** A random UUID (version 4, RFC 9562), lower-case hex: the text randomUUID gives. */
export function randomUuid(): string {
  if (offset === POOL_BYTES) {
    randomFillSync(pool);
    offset = 0;
  }
  const at = offset;
  offset += 16;
  let j = 0;
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) scratch[j++] = 0x2d; // '-'
    let byte = pool[at + i] as number;
    if (i === 6) byte = (byte & 0x0f) | 0x40; // version 4
    else if (i === 8) byte = (byte & 0x3f) | 0x80; // variant 10
    scratch[j++] = HEX[byte >> 4] as number;
    scratch[j++] = HEX[byte & 0x0f] as number;
  }
  return scratch.toString('latin1', 0, 36);
}
