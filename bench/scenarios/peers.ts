import { existsSync } from 'node:fs';
import { baselineMember, engineMember } from '../lib/members.js';
import type { LoadGroup, Row } from '../lib/report.js';
import { HELLO } from '../lib/requests.js';
import { baselineResource, engineResource } from '../lib/subjects.js';

/** nats-server (Debian package nats-server) when installed: then moleculer over NATS is measured too. */
const NATS = ['/usr/sbin/nats-server', '/usr/bin/nats-server', '/usr/local/bin/nats-server'].some((path) => existsSync(path));

/**
 * What users would pick instead, in the same run (bench/peers/, no Switchyard code): a moleculer-web
 * gateway with a remote moleculer service over the TCP transporter (and over NATS when nats-server is
 * installed), and Fastify with @fastify/reply-from in front of an upstream handler process. Each is
 * paired with the matching Switchyard subject: a worker process behind a gateway process, GET
 * /bench/hello answering {"ok":true}. The iii-sdk worker runs as shipped: its OpenTelemetry on, the
 * engine's default config. No target: 1.2 × moleculer with the shipped SDK was withdrawn (issue 26), as
 * baseline (2) with the same worker and no engine reaches only about 0.7 × (docs/performance.md).
 */
export function peers(): LoadGroup {
  const moleculer = baselineResource('../peers/moleculer.mjs');
  const moleculerNats = baselineResource('../peers/moleculer.mjs', { TRANSPORT: 'nats' });
  const fastify = baselineResource('../peers/fastify.mjs');
  // Baseline (2) with the same iii-sdk worker as shipped: what any engine could reach with this worker.
  const b2sdk = baselineResource('2-ws-worker.mjs', { WORKER: 'sdk', WORKER_OTEL: 'true' });
  const raw = engineResource(1, [{ script: 'raw-worker.mjs' }]);
  const sdk = engineResource(1, [{ script: 'sdk-worker.mjs', env: { OTEL_ENABLED: 'true' } }]);
  const rows: Row[] = [
    { name: 'info: Switchyard, iii-sdk worker as shipped, against moleculer-web + TCP transporter', scenario: 'sdk', baseline: 'mol' },
    { name: 'info: Switchyard, raw ws worker, against moleculer-web + TCP transporter', scenario: 'raw', baseline: 'mol' },
    // What any engine could reach with this worker on this machine: the ceiling for the row above.
    { name: 'info: baseline (2) with the iii-sdk worker as shipped (no engine), against moleculer-web + TCP transporter', scenario: 'peerB2sdk', baseline: 'mol' },
    { name: 'info: Switchyard, raw ws worker, against Fastify + @fastify/reply-from', scenario: 'raw', baseline: 'fastify' },
    { name: 'info: Switchyard, iii-sdk worker as shipped, against Fastify + @fastify/reply-from', scenario: 'sdk', baseline: 'fastify' },
  ];
  if (NATS) rows.push({ name: 'info: Switchyard, iii-sdk worker as shipped, against moleculer-web + NATS transporter', scenario: 'sdk', baseline: 'molNats' });
  return {
    kind: 'load',
    name: 'peers',
    resources: [moleculer, moleculerNats, fastify, raw, sdk, b2sdk],
    members: {
      mol: baselineMember('moleculer-web + moleculer service, TCP transporter', moleculer, HELLO),
      molNats: baselineMember('moleculer-web + moleculer service, NATS transporter', moleculerNats, HELLO),
      fastify: baselineMember('Fastify + @fastify/reply-from + upstream process', fastify, HELLO),
      raw: engineMember('Switchyard, raw worker', raw, HELLO),
      sdk: engineMember('Switchyard, iii-sdk worker as shipped (OpenTelemetry on)', sdk, HELLO),
      peerB2sdk: baselineMember('(2) with iii-sdk worker as shipped (OpenTelemetry on)', b2sdk, HELLO),
    },
    order: ['mol', 'sdk', 'raw', 'peerB2sdk', 'fastify', ...(NATS ? ['molNats'] : [])],
    rows,
  };
}
