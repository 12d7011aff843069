import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpFunctionCaller, isPrivateAddress } from '../../src/invocation/http-function-caller.js';
import { RawJson } from '../../src/invocation/raw-json.js';
import { checkInvocation, parseWireInvocation } from '../../src/routing/http-invocation.js';

describe('isPrivateAddress (iii url_validator.rs ranges)', () => {
  it.each([
    ['127.0.0.1', true],
    ['10.1.2.3', true],
    ['172.16.0.1', true],
    ['172.32.0.1', false],
    ['192.168.1.1', true],
    ['169.254.169.254', true],
    ['0.0.0.0', true],
    ['255.255.255.255', true],
    ['192.0.2.7', true],
    ['8.8.8.8', false],
    ['::1', true],
    ['::', true],
    ['fd00::1', true],
    ['fe80::1', true],
    ['ff02::1', true],
    ['::ffff:10.0.0.1', true],
    ['2606:4700::1111', false],
  ])('%s → %s', (address, expected) => {
    expect(isPrivateAddress(address)).toBe(expected);
  });
});

describe('HttpFunctionCaller.checkUrl and checkRegistration', () => {
  const strict = new HttpFunctionCaller({ urlAllowlist: ['*.example.com', 'api.test'], blockPrivateIps: true, requireHttps: true }, { TOKEN: 't' });

  it('applies https, the allowlist globs and literal private addresses', () => {
    expect(strict.checkUrl('https://a.example.com/x').ok).toBe(true);
    expect(strict.checkUrl('https://api.test/x').ok).toBe(true);
    expect(strict.checkUrl('http://a.example.com/x')).toEqual({ ok: false, message: 'HTTPS is required' });
    expect(strict.checkUrl('https://example.org/x')).toEqual({ ok: false, message: 'URL not in allowlist' });
    expect(strict.checkUrl('not a url')).toEqual({ ok: false, message: 'Invalid URL' });
    const open = new HttpFunctionCaller({ urlAllowlist: ['*'], blockPrivateIps: true, requireHttps: false }, {});
    expect(open.checkUrl('http://10.0.0.5/x')).toEqual({ ok: false, message: 'Private IP blocked' });
    expect(open.checkUrl('http://[::1]:8080/x')).toEqual({ ok: false, message: 'Private IP blocked' });
  });

  it('refuses a registration whose auth names a variable the engine lacks', () => {
    expect(strict.checkRegistration({ url: 'https://a.example.com', method: 'POST', auth: { type: 'bearer', tokenKey: 'TOKEN' } })).toBeUndefined();
    expect(strict.checkRegistration({ url: 'https://a.example.com', method: 'POST', auth: { type: 'hmac', secretKey: 'NOPE' } })).toBe(
      "missing_env_var: environment variable 'NOPE' is not set",
    );
  });
});

describe('invocation parsing', () => {
  it('reads iii-sdk\'s wire shape and the record shape alike, defaulting to POST', () => {
    const wire = parseWireInvocation({ url: 'https://x.test/f', timeout_ms: 500, headers: { 'x-a': '1' }, auth: { type: 'api_key', header: 'x-key', value_key: 'K' } });
    expect(wire).toEqual({ url: 'https://x.test/f', method: 'POST', timeoutMs: 500, headers: { 'x-a': '1' }, auth: { type: 'api_key', header: 'x-key', valueKey: 'K' } });
    expect(checkInvocation(wire)).toEqual(wire);
  });

  it('refuses what could not be sent or would inject headers', () => {
    expect(parseWireInvocation({ url: 'ftp://x.test' })).toBe('invocation.url must be http: or https:');
    expect(parseWireInvocation({ url: 'https://x.test', method: 'TRACE' })).toBe('invocation.method must be GET, POST, PUT, PATCH or DELETE');
    expect(parseWireInvocation({ url: 'https://x.test', headers: { 'x-a': 'v\r\nx-b: injected' } })).toBe('invocation.header "x-a" is not a valid header');
    expect(parseWireInvocation({ url: 'https://x.test', auth: { type: 'basic' } })).toBe('invocation.auth.type must be hmac, bearer or api_key');
    expect(parseWireInvocation({ url: 'https://x.test', timeout_ms: 0 })).toBe('invocation.timeout_ms must be a positive integer');
  });
});

describe('HttpFunctionCaller.call against a loopback server', () => {
  let base = '';
  const seen: { headers: Record<string, unknown>; body: string }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      if (req.url === '/slow') return void setTimeout(() => res.end('{}'), 2000);
      if (req.url === '/empty') return void res.writeHead(204).end();
      if (req.url === '/text') return void res.end('not json');
      if (req.url === '/boom') return void res.writeHead(503).end('down');
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ received: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown }));
    });
  });
  const caller = new HttpFunctionCaller({ urlAllowlist: ['127.0.0.1'], blockPrivateIps: false, requireHttps: false }, { TOKEN: 'tok' });

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await caller.close();
    server.close();
  });

  it('sends the payload (raw JSON as it came) with the iii headers and bearer auth, and returns the JSON answer', async () => {
    const outcome = await caller.call('fn::a', { url: `${base}/ok`, method: 'POST', auth: { type: 'bearer', tokenKey: 'TOKEN' } }, new RawJson('{"n":1}'), 5000, 'inv-1');
    expect(outcome).toEqual({ ok: true, value: { received: { n: 1 } } });
    expect(seen.at(-1)?.headers).toMatchObject({ authorization: 'Bearer tok', 'x-iii-function-path': 'fn::a', 'x-iii-invocation-id': 'inv-1' });
  });

  it('maps empty, non-JSON and failed answers to iii\'s outcomes', async () => {
    expect(await caller.call('fn::e', { url: `${base}/empty`, method: 'POST' }, {}, 5000)).toEqual({ ok: true, value: undefined });
    expect(await caller.call('fn::t', { url: `${base}/text`, method: 'POST' }, {}, 5000)).toMatchObject({ ok: false, failure: { source: 'worker', code: 'invalid_response' } });
    expect(await caller.call('fn::b', { url: `${base}/boom`, method: 'POST' }, {}, 5000)).toEqual({
      ok: false,
      failure: { source: 'worker', code: 'http_error', message: 'HTTP 503' },
    });
    expect(await caller.call('fn::x', { url: 'http://localhost:1/x', method: 'POST' }, {}, 5000)).toMatchObject({ ok: false, failure: { code: 'url_validation_failed' } });
  });

  it('stops at the caller\'s deadline (a fractional remainder is fine)', async () => {
    const started = Date.now();
    const outcome = await caller.call('fn::s', { url: `${base}/slow`, method: 'POST', timeoutMs: 10_000 }, {}, 150.7);
    expect(outcome).toMatchObject({ ok: false, failure: { source: 'engine', code: 'TIMEOUT' } });
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it('refuses to connect to a name that resolves to a private address when block_private_ips is on', async () => {
    const guarded = new HttpFunctionCaller({ urlAllowlist: ['localhost'], blockPrivateIps: true, requireHttps: false }, {});
    try {
      const port = new URL(base).port;
      const outcome = await guarded.call('fn::p', { url: `http://localhost:${port}/ok`, method: 'POST' }, {}, 5000);
      expect(outcome).toMatchObject({ ok: false, failure: { code: 'http_request_failed' } });
      expect(outcome.ok ? '' : outcome.failure.message).toContain('Private IP blocked');
    } finally {
      await guarded.close();
    }
  });
});
