import { describe, expect, it } from 'vitest';
import { exposedListeners, isLoopback } from '../../src/config/exposure.js';
import { parseConfig } from '../../src/config/load.js';

describe('exposedListeners', () => {
  it('names the worker port without a token and the admin port when bound beyond loopback', () => {
    const config = parseConfig({ workers: [{ name: 'iii-worker-manager', config: { host: '0.0.0.0' } }, { name: 'switchyard-admin', config: { host: '10.0.0.5' } }] });
    expect(exposedListeners(config).map((l) => [l.listener, l.host])).toEqual([
      ['workers', '0.0.0.0'],
      ['admin', '10.0.0.5'],
    ]);
  });

  it('is quiet for loopback binds and for a worker port with a token', () => {
    const config = parseConfig({
      workers: [{ name: 'iii-worker-manager', config: { host: '0.0.0.0', auth_token: 't' } }, { name: 'switchyard-admin', config: { host: '127.0.0.1' } }],
    });
    expect(exposedListeners(config)).toEqual([]);
    expect(['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost'].every(isLoopback)).toBe(true);
    expect(['0.0.0.0', '::', '192.168.1.2'].some(isLoopback)).toBe(false);
  });

  it('checks every worker listener: an RBAC listener is authenticated by its auth function', () => {
    const config = parseConfig({
      workers: [
        { name: 'iii-worker-manager', config: { host: '127.0.0.1', port: 49134 } },
        { name: 'iii-worker-manager', config: { host: '0.0.0.0', port: 49135, rbac: { auth_function_id: 'p::auth' } } },
        { name: 'iii-worker-manager', config: { host: '0.0.0.0', port: 49136, rbac: { expose_functions: ['match("api::*")'] } } },
        { name: 'iii-worker-manager', config: { host: '0.0.0.0', port: 49137 } },
        { name: 'switchyard-admin', config: { host: '127.0.0.1' } },
      ],
    });
    const exposed = exposedListeners(config);
    expect(exposed.map((l) => l.port)).toEqual([49136, 49137]);
    expect(exposed[0]?.risk).toMatch(/rbac but no auth_function_id/);
  });

  it('warns about the defaults (the worker port listens on 0.0.0.0 with no token)', () => {
    expect(exposedListeners(parseConfig({})).map((l) => l.listener)).toEqual(['workers']);
  });
});
