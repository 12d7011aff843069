import { z } from 'zod';
import type { ConfigIssue } from './config-error.js';

/**
 * Turns zod issues into `ConfigIssue`s an operator can act on: paths written the way the file is
 * (`modules[1](modules::api::RestApiModule).config.cors.allowed_methods[0]`), messages in plain words,
 * and one issue per unknown key so each key is named at its own path.
 */

export function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

const EXPECTED_NAMES: Record<string, string> = {
  number: 'a number',
  string: 'a string',
  boolean: 'a boolean (true or false)',
  array: 'a list',
  object: 'an object',
  record: 'an object',
};

function invalidTypeMessage(issue: z.core.$ZodRawIssue<z.core.$ZodIssueInvalidType>): string {
  if (issue.input === undefined) return 'is required';
  // zod reports a string given to `z.int()` as "expected number"; the reader needs to know it is an integer.
  const wantsInt = issue.expected === 'int' || (issue.schema instanceof z.ZodNumber && issue.schema.isInt === true);
  const expected = wantsInt ? 'an integer' : (EXPECTED_NAMES[issue.expected] ?? issue.expected);
  const { input } = issue;
  // `port: "${PORT}"` quotes a number; say so rather than leave the reader staring at a valid-looking value.
  if ((wantsInt || issue.expected === 'number') && typeof input === 'string' && /^-?\d+(\.\d+)?$/.test(input.trim())) {
    return `expected ${expected}, got the string "${input}" (write numbers without quotes)`;
  }
  // Numbers and booleans are shown as given (1.5, Infinity, true); other strings only by type, as they may be secrets.
  const got = typeof input === 'number' || typeof input === 'boolean' ? String(input) : typeName(input);
  return `expected ${expected}, got ${got}`;
}

/** Passed to every `safeParse`; schema-level messages (the clustering checks, regexes) take precedence. */
export const configErrorMap: z.core.$ZodErrorMap = (issue) => {
  switch (issue.code) {
    case 'invalid_type':
      return invalidTypeMessage(issue);
    case 'too_small': {
      const min = Number(issue.minimum);
      if (issue.origin === 'string') return min === 1 ? 'must not be empty' : `must be at least ${min} characters long`;
      if (issue.origin === 'array') return `must have at least ${min} items`;
      return issue.inclusive === false ? `must be greater than ${min}` : `must be at least ${min}`;
    }
    case 'too_big': {
      const max = Number(issue.maximum);
      if (issue.origin === 'string') return `must be at most ${max} characters long`;
      if (issue.origin === 'array') return `must have at most ${max} items`;
      return issue.inclusive === false ? `must be less than ${max}` : `must be at most ${max}`;
    }
    case 'invalid_value':
      return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    default:
      return undefined;
  }
};

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Appends path segments to an already formatted prefix: `a` + [`b`, 0] → `a.b[0]`. */
export function joinPath(prefix: string, segments: readonly PropertyKey[]): string {
  let out = prefix;
  for (const segment of segments) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else {
      const key = String(segment);
      if (!IDENTIFIER.test(key)) out += `[${JSON.stringify(key)}]`;
      else out += out === '' ? key : `.${key}`;
    }
  }
  return out === '' ? '(root)' : out;
}

function unwrap(schema: z.ZodType): z.ZodType {
  let current = schema;
  for (;;) {
    if (current instanceof z.ZodOptional || current instanceof z.ZodNullable || current instanceof z.ZodDefault) {
      current = current.unwrap() as z.ZodType;
    } else if (current instanceof z.ZodPrefault) {
      current = current.def.innerType as z.ZodType;
    } else {
      return current;
    }
  }
}

/** The keys an object schema allows at `path`, for "did you mean" help on unknown keys. */
function allowedKeysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let current = unwrap(schema);
  for (const segment of path) {
    if (current instanceof z.ZodArray && typeof segment === 'number') current = unwrap(current.element as z.ZodType);
    else if (current instanceof z.ZodObject && typeof segment === 'string') {
      const next = (current.shape as Record<string, z.ZodType | undefined>)[segment];
      if (next === undefined) return [];
      current = unwrap(next);
    } else return [];
  }
  return current instanceof z.ZodObject ? Object.keys(current.shape) : [];
}

function snakeCase(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`).replace(/-/g, '_');
}

function unknownKeyMessage(key: string, allowed: readonly string[]): string {
  const guess = allowed.find((candidate) => candidate === snakeCase(key) || candidate === key.toLowerCase());
  if (guess !== undefined) return `unknown key; did you mean "${guess}"?`;
  return allowed.length > 0 ? `unknown key; allowed keys are ${allowed.join(', ')}` : 'unknown key';
}

/**
 * Converts the issues of one `safeParse` of `schema`. `formatPath` renders a zod path (relative to the
 * parsed value) as a file path, so callers can add context such as the module class.
 */
export function toConfigIssues(
  error: z.ZodError,
  schema: z.ZodType,
  formatPath: (segments: readonly PropertyKey[]) => string,
): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      const allowed = allowedKeysAt(schema, issue.path);
      for (const key of issue.keys) {
        issues.push({ path: formatPath([...issue.path, key]), message: unknownKeyMessage(key, allowed) });
      }
    } else {
      issues.push({ path: formatPath(issue.path), message: issue.message });
    }
  }
  return issues;
}
