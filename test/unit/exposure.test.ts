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

  it('warns about the defaults (the worker port listens on 0.0.0.0 with no token)', () => {
    expect(exposedListeners(parseConfig({})).map((l) => l.listener)).toEqual(['workers']);
  });
});
