import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { IpcChannel } from '../../src/bus/ipc-channel.js';
import { IpcBus } from '../../src/bus/ipc-bus.js';
import { IpcRelay } from '../../src/bus/ipc-relay.js';
import { FreshnessHost } from '../../src/cluster/freshness.js';
import { peerIdentity } from '../../src/cluster/peer-id.js';
import { parseConfig } from '../../src/config/load.js';
import { Engine } from '../../src/engine.js';
import { RawWorker } from '../support/raw-worker.js';

const logger = pino({ level: 'silent' });
const CLUSTER = 'freshness-test';

/**
 * A child ↔ primary link in memory, ordered like node:cluster IPC; what the primary sends to this child
 * arrives `delayMs` late (a busy primary or child), so this child's copy of its siblings lags.
 */
function link(delayMs: number): { child: IpcChannel; primary: IpcChannel } {
  const listeners = { child: new Set<(m: unknown) => void>(), primary: new Set<(m: unknown) => void>() };
  const end = (self: 'child' | 'primary', other: 'child' | 'primary', lag: number): IpcChannel => ({
    send: (message) => {
      const copy: unknown = JSON.parse(JSON.stringify(message));
      // One timer per message with the same lag: delivered in the order sent.
      setTimeout(() => {
        for (const listener of [...listeners[other]]) listener(copy);
      }, lag);
    },
    onMessage: (listener) => {
      listeners[self].add(listener);
      return () => listeners[self].delete(listener);
    },
  });
  return { child: end('child', 'primary', 0), primary: end('primary', 'child', delayMs) };
}

interface Child {
  engine: Engine;
  workerUrl: string;
}

async function startChild(index: number, channel: IpcChannel): Promise<Child> {
  const config = parseConfig({
    workers: [
      { name: 'iii-http', config: { host: '127.0.0.1', port: 0 } },
      { name: 'iii-worker-manager', config: { host: '127.0.0.1', port: 0 } },
    ],
  });
  const identity = peerIdentity('node-a', index);
  const engine = new Engine({
    config,
    logger,
    drainGraceMs: 500,
    primary: channel,
    cluster: {
      identity,
      bus: new IpcBus(channel, identity.peerId, CLUSTER, logger),
      secret: randomBytes(16).toString('hex'),
      clusterName: CLUSTER,
      socketPath: join(tmpdir(), `sy-fresh-${randomBytes(4).toString('hex')}-${index}.sock`),
    },
  });
  const ports = await engine.start();
  return { engine, workerUrl: `ws://127.0.0.1:${ports.workers}` };
}

async function until(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

describe('trigger delivery between sibling processes', () => {
  const cleanups: (() => Promise<unknown> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it("never hands a new provider a trigger whose owner had already left a sibling when it registered", async () => {
    const relay = new IpcRelay(CLUSTER, logger);
    const freshness = new FreshnessHost();
    // Child 0 (the provider's) hears from the primary 300 ms late; child 1 (the consumers') at once.
    const links = [link(300), link(0)];
    for (const { primary } of links) {
      relay.attach(primary);
      freshness.attach(primary);
    }
    const [zero, one] = [await startChild(0, links[0]!.child), await startChild(1, links[1]!.child)];
    cleanups.push(() => zero.engine.close(), () => one.engine.close());

    // Two consumers on child 1, each with a trigger of a type nobody provides yet (parked).
    const stayer = await RawWorker.connect(one.workerUrl);
    const leaver = await RawWorker.connect(one.workerUrl);
    cleanups.push(() => stayer.ws.close(), () => leaver.ws.close());
    for (const [worker, id] of [[stayer, 'live'], [leaver, 'stale']] as const) {
      worker.send({ type: 'registerfunction', id: `fn::${id}` });
      worker.send({ type: 'registertrigger', id, trigger_type: 'ticker', function_id: `fn::${id}`, config: {} });
      await worker.sync();
    }
    // Child 0's copy of child 1 holds both triggers.
    const held = (id: string): boolean => zero.engine.table.snapshotsHeld().some((s) => s.customTriggers?.some((t) => t.id === id) === true);
    await until(() => held('live') && held('stale'));

    const provider = await RawWorker.connect(zero.workerUrl);
    cleanups.push(() => provider.ws.close());
    // The leaver leaves; once child 1 has seen it go, the provider registers the type on child 0.
    leaver.ws.close();
    await until(() => one.engine.hub.size === 1);
    provider.send({ type: 'registertriggertype', id: 'ticker', description: 'ticks' });

    const deliveries = (): string[] => provider.frames.filter((f) => f.type === 'registertrigger' || f.type === 'unregistertrigger').map((f) => `${String(f.type)}:${String(f.id)}`);
    await until(() => deliveries().includes('registertrigger:live'));
    // Child 0's copy catches up; whatever it said when the type was registered, the departed trigger never came.
    await until(() => !held('stale'));
    await provider.sync();
    expect(deliveries()).toEqual(['registertrigger:live']);
  });
});
