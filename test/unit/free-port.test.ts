import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort } from '../support/redis.js';

const ephemeralLow = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);

describe('freePort (test harness)', () => {
  it('hands out ports below the kernel\'s ephemeral range, each one listenable, not the same twice in a row', async () => {
    const ports = [await freePort(), await freePort(), await freePort()];
    expect(new Set(ports).size).toBe(3);
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(port).toBeLessThan(ephemeralLow);
      const server = createServer().listen(port, '127.0.0.1');
      await once(server, 'listening');
      server.close();
      await once(server, 'close');
    }
  });

});
