/**
 * Whether JSON bytes are exactly what JSON.stringify writes for the value they parse to: then the bytes
 * can go out as the HTTP body instead of being parsed and serialised again (answer-body.ts; issue 26
 * point 6: a 64 KiB echoed body cost ~360 KB of garbage that way). The rules, each what V8's
 * JSON.parse and JSON.stringify do:
 *
 * - no whitespace between tokens;
 * - strings hold their characters as they are, except `"` and `\` (written \" and \\), the controls
 *   \b \t \n \f \r, and the other controls below 0x20 as \u00xx in lower-case hex; any other escape
 *   (\/, \u0041, an escaped surrogate) is not canonical. The bytes must be valid UTF-8 (the caller
 *   checks), so no lone surrogate is among them;
 * - a number is canonical when Number's own text for it is the same (so not -0, 1.0, 1e2, 1E+21 or a
 *   number beyond a double's range, which JSON.stringify writes as null);
 * - an object has no key twice (the last would win, at the first's place) and no key of digits only
 *   (JSON.parse puts array-index keys first, in numeric order);
 * - at most MAX_DEPTH arrays and objects deep, so that the serialisation it replaces could not have
 *   overflowed the stack, and at most MAX_KEYS keys in one object (each new key is compared with the
 *   object's earlier ones).
 *
 * Anything else is refused (-1), and the caller takes the long way, which is always right.
 */
import { at, FALSE, isDigit, NULL, numberEnd, startsWith, TRUE } from './json-check.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const ZERO = 0x30;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

export const MAX_DEPTH = 256;
export const MAX_KEYS = 256;

/** Escapes JSON.stringify writes as a backslash and one letter: " \ b f n r t. */
const SHORT_ESCAPE = new Uint8Array(128);
for (const c of '"\\bfnrt') SHORT_ESCAPE[c.charCodeAt(0)] = 1;
/** Controls JSON.stringify writes as \b \t \n \f \r, never as \u00xx. */
const HAS_SHORT_FORM = new Set([0x08, 0x09, 0x0a, 0x0c, 0x0d]);

/** The open containers (1 array, 2 object) and, per object, where its keys start in `keys`. Reused: the walk never re-enters. */
const open = new Uint8Array(MAX_DEPTH);
const keyBase = new Int32Array(MAX_DEPTH);
/**
 * Start, end and hash of each key of the open objects, innermost object's last (KEY_STRIDE ints a
 * key). A new key is compared with its object's earlier keys by hash first, and byte by byte only when
 * the hashes match: comparing bytes with every earlier key cost a 1 MiB answer of 255-key records
 * about four seconds of one core (against ~75 ms to parse and serialise it), which a worker could
 * use to stall the process.
 */
const KEY_STRIDE = 3;
let keys = new Int32Array(KEY_STRIDE * 64);

/**
 * The end of the canonical array or object starting at `from` (an index after it), or -1 when it is
 * not one (not an array or object, not valid JSON, or not written as JSON.stringify writes it).
 */
export function canonicalContainerEnd(bytes: Buffer, from: number): number {
  const first = at(bytes, from);
  if (first !== OPEN_ARRAY && first !== OPEN_OBJECT) return -1;
  let depth = 0;
  let nKeys = 0;
  let i = from;
  let expectKey = false;
  for (;;) {
    if (expectKey) {
      // A member's key and colon at i; then its value.
      if (at(bytes, i) !== QUOTE) return -1;
      const start = i;
      i = stringEnd(bytes, i);
      if (i < 0 || nKeys - (keyBase[depth - 1] as number) >= MAX_KEYS || !addKey(bytes, start, i, keyBase[depth - 1] as number, nKeys)) return -1;
      nKeys++;
      if (at(bytes, i) !== COLON) return -1;
      i++;
      // expectKey is set again before the next turn: by the value's container or the comma after it.
    }
    // A value at i.
    const c = at(bytes, i);
    if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (depth === MAX_DEPTH) return -1;
      open[depth] = c === OPEN_ARRAY ? 1 : 2;
      keyBase[depth] = nKeys;
      depth++;
      i++;
      const next = at(bytes, i);
      if (next !== (c === OPEN_ARRAY ? CLOSE_ARRAY : CLOSE_OBJECT)) {
        expectKey = c === OPEN_OBJECT;
        continue;
      }
      depth--;
      i++;
    } else if (c === QUOTE) {
      i = stringEnd(bytes, i);
    } else if (c === 0x2d || isDigit(c)) {
      i = canonicalNumberEnd(bytes, i);
    } else if (c === 0x74) {
      i = startsWith(bytes, i, TRUE) ? i + 4 : -1;
    } else if (c === 0x66) {
      i = startsWith(bytes, i, FALSE) ? i + 5 : -1;
    } else if (c === 0x6e) {
      i = startsWith(bytes, i, NULL) ? i + 4 : -1;
    } else {
      return -1;
    }
    if (i < 0) return -1;
    // A value ended at i: close what it ends, or go on to the next element.
    for (;;) {
      if (depth === 0) return i;
      const inArray = open[depth - 1] === 1;
      const next = at(bytes, i);
      if (next === COMMA) {
        i++;
        expectKey = !inArray;
        break;
      }
      if (next !== (inArray ? CLOSE_ARRAY : CLOSE_OBJECT)) return -1;
      if (!inArray) nKeys = keyBase[depth - 1] as number;
      depth--;
      i++;
    }
  }
}

/**
 * Adds the key bytes [start, end) (quotes included) as key number `count` of the object whose keys
 * start at `base`, unless it is digits only or one of them already: then false, and nothing is added.
 */
function addKey(bytes: Buffer, start: number, end: number, base: number, count: number): boolean {
  let digits = true;
  // FNV-1a over the key's bytes, computed in the same pass as the digits check.
  let hash = 0x811c9dc5 | 0; // int32, as the table holds it (an empty key keeps this value)
  for (let k = start + 1; k < end - 1; k++) {
    const c = bytes[k] as number;
    if (digits && !isDigit(c)) digits = false;
    hash = Math.imul(hash ^ c, 0x01000193);
  }
  if (digits && end - start > 2) return false;
  const length = end - start;
  for (let k = base; k < count; k++) {
    const slot = KEY_STRIDE * k;
    if (keys[slot + 2] !== hash) continue;
    const s = keys[slot] as number;
    if ((keys[slot + 1] as number) - s === length && bytes.compare(bytes, start, end, s, s + length) === 0) return false;
  }
  if (KEY_STRIDE * (count + 1) > keys.length) {
    const grown = new Int32Array(keys.length * 2);
    grown.set(keys);
    keys = grown;
  }
  const slot = KEY_STRIDE * count;
  keys[slot] = start;
  keys[slot + 1] = end;
  keys[slot + 2] = hash;
  return true;
}

/** The canonical string opening at `from` (a quote): where it ends (after its closing quote), or -1. */
function stringEnd(bytes: Buffer, from: number): number {
  const end = bytes.length;
  let i = from + 1;
  while (i < end) {
    const c = bytes[i] as number;
    if (c === QUOTE) return i + 1;
    if (c < 0x20) return -1;
    if (c === BACKSLASH) {
      const e = at(bytes, i + 1);
      if (e >= 0 && e < 128 && SHORT_ESCAPE[e] === 1) {
        i += 2;
      } else if (e === 0x75) {
        // \u00xx for a control without a short form, lower-case hex.
        if (at(bytes, i + 2) !== ZERO || at(bytes, i + 3) !== ZERO) return -1;
        const high = at(bytes, i + 4);
        const low = at(bytes, i + 5);
        if (high !== ZERO && high !== ZERO + 1) return -1;
        const lowValue = isDigit(low) ? low - ZERO : low >= 0x61 && low <= 0x66 ? low - 0x61 + 10 : -1;
        if (lowValue < 0 || HAS_SHORT_FORM.has((high - ZERO) * 16 + lowValue)) return -1;
        i += 6;
      } else {
        return -1;
      }
    } else {
      i++;
    }
  }
  return -1;
}

/** The canonical number starting at `from`: where it ends, or -1. */
function canonicalNumberEnd(bytes: Buffer, from: number): number {
  const end = numberEnd(bytes, from);
  if (end < 0) return -1;
  // An integer of at most 15 digits is written as itself, except -0 (written 0).
  let integer = end - from <= 15 && !(bytes[from] === 0x2d && bytes[from + 1] === ZERO);
  for (let k = from; k < end && integer; k++) integer = bytes[k] === 0x2d || isDigit(bytes[k] as number);
  if (integer) return end;
  const text = bytes.toString('latin1', from, end);
  return String(Number(text)) === text ? end : -1;
}
