import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { checkParserHook } from '../../src/http/parser-hook-check.js';

describe('checkParserHook (the framing guard start-up self-check)', () => {
  it("passes on this Node.js release: an accepted HTTP socket has Node's one data listener", () => {
    expect(() => checkParserHook()).not.toThrow();
  });

  it('refuses to start, with a clear coded error, when Node puts no data listener on the socket', () => {
    const withoutHook = (): ReturnType<typeof createServer> => {
      const server = createServer();
      server.removeAllListeners('connection');
      return server;
    };
    expect(() => checkParserHook(withoutHook)).toThrow(expect.objectContaining({ code: 'UNSUPPORTED_RUNTIME', message: expect.stringContaining('framing guard') }));
  });
});
