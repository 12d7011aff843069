// Between nodes (issue 15, point 4): Redis over TLS with an ACL user, and mutual TLS on the TCP
// forward links. Two nodes serve each other's workers across both; an outsider without a certificate
// the cluster CA signed cannot reach the forward listener. Certificates are made here with openssl.
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeHello, FORWARD_PROTOCOL_VERSION } from '../../src/forwarding/forward-messages.js';
import { waitForStatus } from '../support/http.js';
import { waitUntil } from '../support/logs.js';
import type { EngineHandle } from '../support/processes.js';
import { startEngine } from '../support/processes.js';
import { RawWorker } from '../support/raw-worker.js';
import { freePort } from '../support/redis.js';

const SECRET = 'between-nodes-secret';
const ACL_USER = 'switchyard';
const ACL_PASSWORD = 'acl-password-1';

function openssl(dir: string, ...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

/** A CA, and a certificate it signs for 127.0.0.1 (server and client use). */
function makeCertificates(dir: string, name: string): { ca: string; cert: string; key: string } {
  openssl(dir, 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}-ca.key`, '-out', `${name}-ca.pem`, '-days', '2', '-subj', `/CN=${name}-ca`);
  openssl(dir, 'req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', '/CN=127.0.0.1');
  writeFileSync(join(dir, `${name}.ext`), 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n');
  openssl(dir, 'x509', '-req', '-in', `${name}.csr`, '-CA', `${name}-ca.pem`, '-CAkey', `${name}-ca.key`, '-CAcreateserial', '-out', `${name}.pem`, '-days', '2', '-extfile', `${name}.ext`);
  return { ca: join(dir, `${name}-ca.pem`), cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) };
}

describe('between nodes: rediss:// with an ACL user, mutual TLS forward links', () => {
  let dir: string;
  let redis: ChildProcess;
  let redisPort: number;
  let nodeA: EngineHandle;
  let nodeB: EngineHandle;
  let forwardPortA: number;
  let certs: { ca: string; cert: string; key: string };
  let rogue: { ca: string; cert: string; key: string };
  const workers: RawWorker[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-tls-'));
    certs = makeCertificates(dir, 'cluster');
    rogue = makeCertificates(dir, 'rogue');
    redisPort = await freePort();
    // TLS only (no plain port), and only the ACL user: the default user is off.
    redis = spawn(
      'redis-server',
      ['--port', '0', '--tls-port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir,
        '--tls-cert-file', certs.cert, '--tls-key-file', certs.key, '--tls-ca-cert-file', certs.ca, '--tls-auth-clients', 'no',
        '--user', 'default', 'off', '--user', ACL_USER, 'on', `>${ACL_PASSWORD}`, '~*', '&*', '+@all'],
      { stdio: 'ignore' },
    );
    const url = `rediss://${ACL_USER}:${ACL_PASSWORD}@127.0.0.1:${redisPort}`;
    await waitUntil(
      async () => {
        const probe = new Redis(url, { tls: { ca: readFileSync(certs.ca, 'utf8') }, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
        probe.on('error', () => undefined);
        try {
          await probe.connect();
          return (await probe.ping()) === 'PONG';
        } catch {
          return false;
        } finally {
          probe.disconnect();
        }
      },
      10_000,
      'redis-server with TLS',
    );
    forwardPortA = await freePort();
    const cluster = (nodeId: string, extra: Record<string, unknown> = {}) => ({
      processes: 1,
      redis_url: url,
      redis_tls_ca_file: certs.ca,
      forward_tls: { cert_file: certs.cert, key_file: certs.key, ca_file: certs.ca },
      secret: SECRET,
      name: `tls${Math.random().toString(36).slice(2, 8)}`,
      node_id: nodeId,
      advertise_host: '127.0.0.1',
      heartbeat_ms: 200,
      lease_ms: 1000,
      ...extra,
    });
    const shared = cluster('node-a', { forward_port: forwardPortA });
    nodeA = await startEngine({ cluster: shared, logLevel: 'info' });
    nodeB = await startEngine({ cluster: { ...shared, node_id: 'node-b', forward_port: 0 }, logLevel: 'info' });
  });

  afterAll(async () => {
    await Promise.allSettled(workers.map((w) => w.close()));
    await nodeB?.stop();
    await nodeA?.stop();
    redis?.kill('SIGKILL');
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('shares routes over rediss:// and forwards a request across nodes over mutual TLS', async () => {
    const worker = await RawWorker.connect(nodeA.workerUrl);
    workers.push(worker);
    worker.serve('tls::hello', () => ({ status_code: 200, body: { from: 'A' } }));
    worker.route('tls::hello', 'GET', 'tls/hello');
    const res = await waitForStatus(`${nodeB.httpUrl}/tls/hello`, (s) => s === 200, {}, 15_000);
    expect(res.json()).toEqual({ from: 'A' });
    expect(nodeB.stdout.json().some((l) => l.msg === 'redis bus in sync')).toBe(true);
  });

  it('refuses a forward connection without a certificate, with one another CA signed, and over plain TCP', async () => {
    const handshake = (options: { cert?: string; key?: string }): Promise<string> =>
      new Promise((resolve) => {
        const socket = tlsConnect({ host: '127.0.0.1', port: forwardPortA, ca: readFileSync(certs.ca, 'utf8'), ...options });
        socket.on('secureConnect', () => {
          // TLS 1.3 reports the client certificate's refusal after the handshake: try to talk.
          socket.write(encodeHello({ version: FORWARD_PROTOCOL_VERSION, cluster: 'x', secret: SECRET, peerId: 'outsider' }));
        });
        socket.on('data', () => resolve('answered'));
        socket.on('error', (err) => resolve(`error: ${err.message}`));
        socket.on('close', () => resolve('closed'));
      });
    expect(await handshake({})).not.toBe('answered');
    expect(await handshake({ cert: readFileSync(rogue.cert, 'utf8'), key: readFileSync(rogue.key, 'utf8') })).not.toBe('answered');
    const plain = await new Promise<string>((resolve) => {
      const socket = netConnect({ host: '127.0.0.1', port: forwardPortA });
      socket.on('connect', () => socket.write(encodeHello({ version: FORWARD_PROTOCOL_VERSION, cluster: 'x', secret: SECRET, peerId: 'outsider' })));
      socket.on('data', (chunk: Buffer) => resolve(`answered ${chunk.length}`));
      socket.on('error', () => resolve('error'));
      socket.on('close', () => resolve('closed'));
    });
    expect(plain.startsWith('answered')).toBe(false);
    await waitUntil(() => nodeA.stdout.json().some((l) => l.msg === 'forward connection refused: TLS handshake failed'), 5000, 'the refusal log');
    // The legitimate link still serves.
    expect((await waitForStatus(`${nodeB.httpUrl}/tls/hello`, (s) => s === 200)).json()).toEqual({ from: 'A' });
  });
});
