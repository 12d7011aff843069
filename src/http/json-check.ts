/**
 * Checks that a request body is one JSON value, as JSON.parse would read it, without building the
 * value (docs/http.md#bodies). A JSON body is validated on arrival and then sent on as its own text
 * (body.ts): parsing it only to drop the result allocated the whole document once more per request,
 * about 145 KB for a 64 KiB body of records, most of the child's garbage on that path
 * (docs/performance.md, issue 26 point 6).
 *
 * The grammar is RFC 8259's over the string's UTF-16 code units, which is what JSON.parse accepts:
 * whitespace is space, tab, LF and CR; strings hold any code unit from 0x20 up (lone surrogates
 * included) except an unescaped quote or backslash; escapes are \" \\ \/ \b \f \n \r \t and \u with
 * four hex digits; numbers are -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?. A property test holds it
 * to JSON.parse's verdict (test/unit/json-check.test.ts).
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

function isDigit(c: number): boolean {
  return c >= ZERO && c <= NINE;
}

function isHex(c: number): boolean {
  return (c >= ZERO && c <= NINE) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

/**
 * 'ok' when `text` is one JSON value nested at most `maxDepth` arrays and objects deep, 'too_deep'
 * when it is valid JSON nested deeper, 'invalid' otherwise. Allocates one byte per level of the
 * deepest nesting it follows (at most `maxDepth` + 1).
 */
export function checkJson(text: string, maxDepth: number): JsonCheck {
  // The open containers, innermost last: 1 for an array, 2 for an object.
  const open = new Uint8Array(maxDepth + 1);
  let depth = 0;
  const end = text.length;
  let i = skipSpace(text, 0);
  for (;;) {
    // A value starts at i.
    if (i >= end) return 'invalid';
    const c = text.charCodeAt(i);
    if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (depth === maxDepth) return parses(text) ? 'too_deep' : 'invalid';
      open[depth++] = c === OPEN_ARRAY ? 1 : 2;
      i = skipSpace(text, i + 1);
      if (c === OPEN_ARRAY) {
        if (text.charCodeAt(i) === CLOSE_ARRAY) {
          depth--;
          i++;
        } else {
          continue; // the array's first value
        }
      } else if (text.charCodeAt(i) === CLOSE_OBJECT) {
        depth--;
        i++;
      } else {
        i = memberName(text, i);
        if (i < 0) return 'invalid';
        continue; // the member's value
      }
    } else if (c === QUOTE) {
      i = stringEnd(text, i);
      if (i < 0) return 'invalid';
    } else if (c === MINUS || isDigit(c)) {
      i = numberEnd(text, i);
      if (i < 0) return 'invalid';
    } else if (text.startsWith('true', i)) {
      i += 4;
    } else if (text.startsWith('false', i)) {
      i += 5;
    } else if (text.startsWith('null', i)) {
      i += 4;
    } else {
      return 'invalid';
    }
    // A value ended at i: close what it ends, or go on to the next element.
    for (;;) {
      i = skipSpace(text, i);
      if (depth === 0) return i === end ? 'ok' : 'invalid';
      const next = text.charCodeAt(i);
      const inArray = open[depth - 1] === 1;
      if (next === COMMA) {
        i = skipSpace(text, i + 1);
        if (!inArray) {
          i = memberName(text, i);
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
function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

function skipSpace(text: string, from: number): number {
  let i = from;
  for (;;) {
    const c = text.charCodeAt(i);
    if (c !== SPACE && c !== LF && c !== CR && c !== TAB) return i;
    i++;
  }
}

/** A member's name and its colon from `from`; where its value starts (after spaces), or -1. */
function memberName(text: string, from: number): number {
  if (text.charCodeAt(from) !== QUOTE) return -1;
  let i = stringEnd(text, from);
  if (i < 0) return -1;
  i = skipSpace(text, i);
  if (text.charCodeAt(i) !== COLON) return -1;
  return skipSpace(text, i + 1);
}

/** The string opening at `from` (a quote): where it ends (after its closing quote), or -1. */
function stringEnd(text: string, from: number): number {
  const end = text.length;
  let i = from + 1;
  while (i < end) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) return i + 1;
    if (c < SPACE) return -1;
    if (c === BACKSLASH) {
      const e = text.charCodeAt(i + 1);
      if (e === 0x75) {
        if (!(isHex(text.charCodeAt(i + 2)) && isHex(text.charCodeAt(i + 3)) && isHex(text.charCodeAt(i + 4)) && isHex(text.charCodeAt(i + 5)))) return -1;
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
function numberEnd(text: string, from: number): number {
  let i = from;
  if (text.charCodeAt(i) === MINUS) i++;
  const first = text.charCodeAt(i);
  if (first === ZERO) i++;
  else if (isDigit(first)) while (isDigit(text.charCodeAt(++i)));
  else return -1;
  if (text.charCodeAt(i) === DOT) {
    if (!isDigit(text.charCodeAt(++i))) return -1;
    while (isDigit(text.charCodeAt(++i)));
  }
  const e = text.charCodeAt(i);
  if (e === 0x65 || e === 0x45) {
    const sign = text.charCodeAt(++i);
    if (sign === PLUS || sign === MINUS) i++;
    if (!isDigit(text.charCodeAt(i))) return -1;
    while (isDigit(text.charCodeAt(++i)));
  }
  return i;
}
