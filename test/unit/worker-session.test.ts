import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { authInput, parseAuthResult } from '../../src/workers/worker-session.js';

const upgrade = (url: string, headers: Record<string, string | string[]>, remoteAddress = '::ffff:10.0.0.7'): IncomingMessage =>
  ({ url, headers, socket: { remoteAddress } }) as unknown as IncomingMessage;

describe('authInput (what an RBAC auth function receives)', () => {
  it('keeps query keys and header names that are Object.prototype members as data', () => {
    const input = authInput(upgrade('/?constructor=a&__proto__=b&toString=c&constructor=d', { constructor: 'h', 'x-many': ['1', '2'] }));
    expect(JSON.stringify(input.query_params)).toBe('{"constructor":["a","d"],"__proto__":["b"],"toString":["c"]}');
    expect(JSON.stringify(input.headers)).toBe('{"constructor":"h","x-many":"1, 2"}');
    expect(input.ip_address).toBe('10.0.0.7');
  });
});

describe('parseAuthResult', () => {
  it('refuses what is not an AuthResult, with the reason', () => {
    expect(parseAuthResult(null)).toEqual({ error: 'auth function returned no result' });
    expect(parseAuthResult([1])).toEqual({ error: 'auth function result is not an object' });
    expect(parseAuthResult({ allowed_functions: 'x' })).toEqual({ error: 'auth result: allowed_functions must be a list of strings' });
    expect(parseAuthResult({ allow_function_registration: 'yes' })).toEqual({ error: 'auth result: allow_function_registration must be a boolean' });
  });

  it('fills iii defaults', () => {
    expect(parseAuthResult({})).toEqual({
      allowedFunctions: [],
      forbiddenFunctions: [],
      allowTriggerTypeRegistration: false,
      allowFunctionRegistration: true,
      context: {},
    });
  });
});
