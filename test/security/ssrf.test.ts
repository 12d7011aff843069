// Issue 23, attack 4: `block_private_ips` once let IPv4-mapped IPv6 spellings of loopback through, at
// registration and at connect time (the engine posted to a loopback listener and returned its body).
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logLines, waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';

describe('block_private_ips normalises every address form (issue 23)', () => {
  let engine: EngineHandle;
  let worker: RawWorker;
  let probe: Server;
  let port: number;
  let hits = 0;

  beforeAll(async () => {
    probe = createServer((req, res) => {
      hits++;
      res.setHeader('content-type', 'application/json');
      res.end('{"secret":"loopback"}');
    });
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    port = (probe.address() as AddressInfo).port;
    engine = await startEngine({
      logLevel: 'info',
      modules: [{ name: 'iii-http-functions', config: { security: { url_allowlist: ['*'], block_private_ips: true, require_https: false } } }],
    });
    worker = await RawWorker.connect(engine.workerUrl);
  });
  afterAll(async () => {
    await worker?.close();
    await engine?.stop();
    await new Promise((resolve) => probe?.close(resolve));
  });

  const spellings = (p: number): string[] => [
    `http://[::ffff:127.0.0.1]:${p}/`,
    `http://[::ffff:7f00:1]:${p}/`,
    `http://[0:0:0:0:0:ffff:127.0.0.1]:${p}/`,
    `http://[::127.0.0.1]:${p}/`,
    `http://[64:ff9b::127.0.0.1]:${p}/`,
    `http://[2002:7f00:1::]:${p}/`,
    `http://[::ffff:a9fe:a9fe]:${p}/`,
    `http://2130706433:${p}/`,
    `http://0177.0.0.1:${p}/`,
    `http://0x7f.1:${p}/`,
    `http://127.1:${p}/`,
  ];

  it('refuses each spelling of a private address at registration, and never connects to it', async () => {
    const urls = spellings(port);
    for (const [i, url] of urls.entries()) worker.send({ type: 'registerfunction', id: `ssrf::${i}`, invocation: { url, method: 'POST' } });
    await worker.sync();
    await waitUntil(
      () => logLines(engine, (l) => l.msg === 'HTTP-invoked function registration refused').length >= urls.length,
      20_000,
      'every spelling refused',
    );
    for (const [i] of urls.entries()) {
      const invocationId = `call-${i}`;
      worker.send({ type: 'invokefunction', invocation_id: invocationId, function_id: `ssrf::${i}`, data: {} });
      const result = await worker.next((f) => f.type === 'invocationresult' && f.invocation_id === invocationId, 20_000);
      expect({ url: urls[i], error: result.error !== undefined, result: result.result }).toEqual({ url: urls[i], error: true, result: undefined });
    }
    expect(hits).toBe(0);
  });
});
