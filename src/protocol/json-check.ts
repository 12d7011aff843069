/**
 * Checks that a request body is one JSON value, as JSON.parse would read it, without building the
 * value (docs/http.md#bodies). A JSON body is validated on arrival and then sent on as its own text
 * (body.ts): parsing it only to drop the result allocated the whole document once more per request,
 * about 145 KB for a 64 KiB body of records, most of the child's garbage on that path
 * (docs/performance.md, issue 26 point 6).
 *
 * It reads the body's bytes, not its text: decoding them first allocated the document once more
 * (issue 26 point 6). The grammar is RFC 8259's, which is what JSON.parse accepts of the decoded
 * text: whitespace is space, tab, LF and CR; strings hold anything from 0x20 up except an unescaped
 * quote or backslash; escapes are \" \\ \/ \b \f \n \r \t and \u with four hex digits; numbers are
 * -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?. Every byte of a multi-byte UTF-8 sequence is 0x80 or
 * more, so it is allowed where its character is (in strings) and refused where it is not; and UTF-8
 * decoding never folds an ASCII byte into a replacement character, so invalid sequences, which decode
 * to U+FFFD, get the same verdict too. A property test holds it to JSON.parse's verdict on the bytes'
 * decoded text (test/unit/json-check.test.ts).
 */
export type JsonCheck = 'ok' | 'invalid' | 'too_deep';

const SPACE = 0x20;
const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/** Code units that may follow a backslash (besides `u`). */
const SIMPLE_ESCAPE = new Uint8Array(128);
for (const c of '"\\/bfnrt') SIMPLE_ESCAPE[c.charCodeAt(0)] = 1;

export const TRUE = [0x74, 0x72, 0x75, 0x65];
export const FALSE = [0x66, 0x61, 0x6c, 0x73, 0x65];
export const NULL = [0x6e, 0x75, 0x6c, 0x6c];

export function startsWith(bytes: Buffer, at: number, word: readonly number[]): boolean {
  for (let k = 0; k < word.length; k++) if (bytes[at + k] !== word[k]) return false; // past the end: undefined, never equal
  return true;
}

/** The byte at `i`, or -1 past the end (which nothing matches, as charCodeAt's NaN did for text). */
export function at(bytes: Buffer, i: number): number {
  return bytes[i] ?? -1;
}

export function isDigit(c: number): boolean {
  return c >= ZERO && c <= NINE;
}

function isHex(c: number): boolean {
  return (c >= ZERO && c <= NINE) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

/**
 * 'ok' when `bytes` (UTF-8) is one JSON value nested at most `maxDepth` arrays and objects deep, 'too_deep'
 * when it is valid JSON nested deeper, 'invalid' otherwise. Allocates one byte per level of the
 * deepest nesting it follows (at most `maxDepth` + 1).
 */
export function checkJson(bytes: Buffer, maxDepth: number): JsonCheck {
  // The open containers, innermost last: 1 for an array, 2 for an object.
  const open = new Uint8Array(maxDepth + 1);
  let depth = 0;
  const end = bytes.length;
  let i = skipSpace(bytes, 0);
  for (;;) {
    // A value starts at i.
    if (i >= end) return 'invalid';
    const c = at(bytes, i);
    if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (depth === maxDepth) return parses(bytes) ? 'too_deep' : 'invalid';
      open[depth++] = c === OPEN_ARRAY ? 1 : 2;
      i = skipSpace(bytes, i + 1);
      if (c === OPEN_ARRAY) {
        if (at(bytes, i) === CLOSE_ARRAY) {
          depth--;
          i++;
        } else {
          continue; // the array's first value
        }
      } else if (at(bytes, i) === CLOSE_OBJECT) {
        depth--;
        i++;
      } else {
        i = memberName(bytes, i);
        if (i < 0) return 'invalid';
        continue; // the member's value
      }
    } else if (c === QUOTE) {
      i = stringEnd(bytes, i);
      if (i < 0) return 'invalid';
    } else if (c === MINUS || isDigit(c)) {
      i = numberEnd(bytes, i);
      if (i < 0) return 'invalid';
    } else if (startsWith(bytes, i, TRUE)) {
      i += 4;
    } else if (startsWith(bytes, i, FALSE)) {
      i += 5;
    } else if (startsWith(bytes, i, NULL)) {
      i += 4;
    } else {
      return 'invalid';
    }
    // A value ended at i: close what it ends, or go on to the next element.
    for (;;) {
      i = skipSpace(bytes, i);
      if (depth === 0) return i === end ? 'ok' : 'invalid';
      const next = at(bytes, i);
      const inArray = open[depth - 1] === 1;
      if (next === COMMA) {
        i = skipSpace(bytes, i + 1);
        if (!inArray) {
          i = memberName(bytes, i);
          if (i < 0) return 'invalid';
        }
        break; // the next value
      }
      if (next !== (inArray ? CLOSE_ARRAY : CLOSE_OBJECT)) return 'invalid';
      depth--;
      i++;
    }
  }
}

/** Too deep for the walk's stack: whether JSON.parse reads it (rare, so its cost does not matter). */
function parses(bytes: Buffer): boolean {
  try {
    JSON.parse(bytes.toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

function skipSpace(bytes: Buffer, from: number): number {
  let i = from;
  for (;;) {
    const c = at(bytes, i);
    if (c !== SPACE && c !== LF && c !== CR && c !== TAB) return i;
    i++;
  }
}

/** A member's name and its colon from `from`; where its value starts (after spaces), or -1. */
function memberName(bytes: Buffer, from: number): number {
  if (at(bytes, from) !== QUOTE) return -1;
  let i = stringEnd(bytes, from);
  if (i < 0) return -1;
  i = skipSpace(bytes, i);
  if (at(bytes, i) !== COLON) return -1;
  return skipSpace(bytes, i + 1);
}

/** The string opening at `from` (a quote): where it ends (after its closing quote), or -1. */
function stringEnd(bytes: Buffer, from: number): number {
  const end = bytes.length;
  let i = from + 1;
  while (i < end) {
    const c = at(bytes, i);
    if (c === QUOTE) return i + 1;
    if (c < SPACE) return -1;
    if (c === BACKSLASH) {
      const e = at(bytes, i + 1);
      if (e === 0x75) {
        if (!(isHex(at(bytes, i + 2)) && isHex(at(bytes, i + 3)) && isHex(at(bytes, i + 4)) && isHex(at(bytes, i + 5)))) return -1;
        i += 6;
      } else if (e < 128 && SIMPLE_ESCAPE[e] === 1) {
        i += 2;
      } else {
        return -1;
      }
    } else {
      i++;
    }
  }
  return -1;
}

/** The number starting at `from` (a minus or a digit): where it ends, or -1. */
export function numberEnd(bytes: Buffer, from: number): number {
  let i = from;
  if (at(bytes, i) === MINUS) i++;
  const first = at(bytes, i);
  if (first === ZERO) i++;
  else if (isDigit(first)) while (isDigit(at(bytes, ++i)));
  else return -1;
  if (at(bytes, i) === DOT) {
    if (!isDigit(at(bytes, ++i))) return -1;
    while (isDigit(at(bytes, ++i)));
  }
  const e = at(bytes, i);
  if (e === 0x65 || e === 0x45) {
    const sign = at(bytes, ++i);
    if (sign === PLUS || sign === MINUS) i++;
    if (!isDigit(at(bytes, i))) return -1;
    while (isDigit(at(bytes, ++i)));
  }
  return i;
}
