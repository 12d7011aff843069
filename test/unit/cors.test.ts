import { describe, expect, it } from 'vitest';
import { CorsPolicy } from '../../src/http/cors.js';

describe('CorsPolicy with cors unset (permissive, as iii)', () => {
  const policy = new CorsPolicy(undefined);

  it('does nothing for a request without Origin', () => {
    expect(policy.decide('GET', {})).toStrictEqual({ kind: 'none' });
    expect(policy.decide('OPTIONS', { 'access-control-request-method': 'POST' })).toStrictEqual({ kind: 'none' });
  });

  it('allows any origin with "*" and no Vary', () => {
    expect(policy.decide('GET', { origin: 'https://a.example' })).toStrictEqual({
      kind: 'headers',
      headers: { 'access-control-allow-origin': '*' },
    });
    expect(policy.decide('POST', { origin: 'null' })).toStrictEqual({
      kind: 'headers',
      headers: { 'access-control-allow-origin': '*' },
    });
  });

  it('answers any preflight with every common method and echoes requested headers', () => {
    expect(
      policy.decide('OPTIONS', {
        origin: 'https://a.example',
        'access-control-request-method': 'DELETE',
        'access-control-request-headers': 'x-token, content-type',
      }),
    ).toStrictEqual({
      kind: 'preflight',
      headers: {
        'access-control-allow-origin': '*',
        'access-control-allow-methods': 'GET, HEAD, PUT, PATCH, POST, DELETE, OPTIONS',
        'access-control-allow-headers': 'x-token, content-type',
        'access-control-max-age': '600',
      },
    });
    expect(policy.decide('OPTIONS', { origin: 'https://a.example', 'access-control-request-method': 'PURGE' })).toStrictEqual({
      kind: 'preflight',
      headers: {
        'access-control-allow-origin': '*',
        'access-control-allow-methods': 'GET, HEAD, PUT, PATCH, POST, DELETE, OPTIONS',
        'access-control-max-age': '600',
      },
    });
  });

  it('treats OPTIONS without Access-Control-Request-Method as a plain request', () => {
    expect(policy.decide('OPTIONS', { origin: 'https://a.example' })).toStrictEqual({
      kind: 'headers',
      headers: { 'access-control-allow-origin': '*' },
    });
  });

  it('treats a GET carrying Access-Control-Request-Method as a plain request', () => {
    expect(policy.decide('GET', { origin: 'https://a.example', 'access-control-request-method': 'GET' })).toStrictEqual({
      kind: 'headers',
      headers: { 'access-control-allow-origin': '*' },
    });
  });
});

describe('CorsPolicy with a configured list', () => {
  const policy = new CorsPolicy({
    allowedOrigins: ['https://app.example', 'http://localhost:3000'],
    allowedMethods: ['GET', 'POST'],
  });

  it('reflects a listed origin and adds Vary: Origin', () => {
    expect(policy.decide('GET', { origin: 'https://app.example' })).toStrictEqual({
      kind: 'headers',
      headers: { 'access-control-allow-origin': 'https://app.example', vary: 'Origin' },
    });
    expect(policy.decide('DELETE', { origin: 'http://localhost:3000' })).toStrictEqual({
      kind: 'headers',
      headers: { 'access-control-allow-origin': 'http://localhost:3000', vary: 'Origin' },
    });
  });

  it('allows no unlisted origin (compared exactly), but says the answer varies by Origin', () => {
    for (const origin of ['https://evil.example', 'https://app.example.evil', 'HTTPS://APP.EXAMPLE', 'https://app.example/']) {
      expect(policy.decide('GET', { origin })).toStrictEqual({ kind: 'headers', headers: { vary: 'Origin' } });
    }
  });

  it('answers a preflight for a listed origin and method with the configured methods', () => {
    expect(
      policy.decide('OPTIONS', {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      }),
    ).toStrictEqual({
      kind: 'preflight',
      headers: {
        'access-control-allow-origin': 'https://app.example',
        vary: 'Origin',
        'access-control-allow-methods': 'GET, POST',
        'access-control-allow-headers': 'content-type',
        'access-control-max-age': '600',
      },
    });
  });

  it('matches the requested method case-insensitively', () => {
    expect(policy.decide('OPTIONS', { origin: 'https://app.example', 'access-control-request-method': 'post' }).kind).toBe(
      'preflight',
    );
  });

  it('rejects a preflight for an unlisted method or origin', () => {
    expect(policy.decide('OPTIONS', { origin: 'https://app.example', 'access-control-request-method': 'DELETE' })).toStrictEqual({
      kind: 'preflight_rejected',
    });
    expect(policy.decide('OPTIONS', { origin: 'https://evil.example', 'access-control-request-method': 'GET' })).toStrictEqual({
      kind: 'preflight_rejected',
    });
  });

  it('adds only Vary: Origin without Origin (a cache must not reuse it for an allowed origin)', () => {
    expect(policy.decide('OPTIONS', { 'access-control-request-method': 'GET' })).toStrictEqual({
      kind: 'headers',
      headers: { vary: 'Origin' },
    });
  });
});

describe('CorsPolicy with "*" in the configured list', () => {
  const policy = new CorsPolicy({ allowedOrigins: ['*'], allowedMethods: ['GET'] });

  it('allows any origin, reflected with Vary', () => {
    expect(policy.decide('GET', { origin: 'https://any.example' })).toStrictEqual({
      kind: 'headers',
      headers: { 'access-control-allow-origin': 'https://any.example', vary: 'Origin' },
    });
  });

  it('still enforces the method list on preflight', () => {
    expect(policy.decide('OPTIONS', { origin: 'https://any.example', 'access-control-request-method': 'PUT' })).toStrictEqual({
      kind: 'preflight_rejected',
    });
    expect(policy.decide('OPTIONS', { origin: 'https://any.example', 'access-control-request-method': 'GET' })).toStrictEqual({
      kind: 'preflight',
      headers: {
        'access-control-allow-origin': 'https://any.example',
        vary: 'Origin',
        'access-control-allow-methods': 'GET',
        'access-control-max-age': '600',
      },
    });
  });
});

describe('CorsPolicy with empty lists (as iii 0.22.1: empty means any)', () => {
  const policy = new CorsPolicy({ allowedOrigins: [], allowedMethods: [] });

  it('allows any origin, reflected with Vary, and any method on preflight', () => {
    expect(policy.decide('GET', { origin: 'https://a.example' })).toStrictEqual({
      kind: 'headers',
      headers: { 'access-control-allow-origin': 'https://a.example', vary: 'Origin' },
    });
    const preflight = policy.decide('OPTIONS', { origin: 'https://a.example', 'access-control-request-method': 'PATCH' });
    expect(preflight).toMatchObject({ kind: 'preflight', headers: { 'access-control-allow-methods': 'GET, HEAD, PUT, PATCH, POST, DELETE, OPTIONS' } });
  });
});
