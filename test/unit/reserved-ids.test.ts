import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { encodeBusMessage } from '../../src/bus/bus-messages.js';
import type { IpcChannel } from '../../src/bus/ipc-channel.js';
import { IpcRelay } from '../../src/bus/ipc-relay.js';
import { WORKER_PROVIDABLE_ENGINE_IDS, reservedIdProblem } from '../../src/workers/reserved-ids.js';

describe('reserved engine:: ids (issue 23, point 6)', () => {
  const none = (): boolean => false;

  it('refuses every engine:: id but the ones a worker may provide, and those only while the engine does not', () => {
    expect(reservedIdProblem('engine::functions::list', none)).toMatch(/reserved/);
    expect(reservedIdProblem('engine::anything', none)).toMatch(/reserved/);
    expect(reservedIdProblem('orders::engine::x', none)).toBeUndefined();
    expect(reservedIdProblem('Engine::x', none)).toBeUndefined();
    expect([...WORKER_PROVIDABLE_ENGINE_IDS]).toEqual(['engine::queue::enqueue']);
    expect(reservedIdProblem('engine::queue::enqueue', none)).toBeUndefined();
    expect(reservedIdProblem('engine::queue::enqueue', (id) => id === 'engine::queue::enqueue')).toMatch(/module is enabled/);
  });
});

describe('IpcRelay replays snapshots to a (re)started child one message each (issue 23, point 2)', () => {
  it('answers hello with one snapshot message per peer, then an empty sync', () => {
    const relay = new IpcRelay('c', pino({ level: 'silent' }));
    const channel = (): IpcChannel & { sent: any[]; deliver(m: unknown): void } => {
      let listener: (m: unknown) => void = () => undefined;
      const sent: any[] = [];
      return { sent, send: (m) => sent.push(m), onMessage: (l) => ((listener = l), () => undefined), deliver: (m) => listener(m) };
    };
    const children = [channel(), channel(), channel()];
    for (const [i, child] of children.slice(0, 2).entries()) {
      relay.attach(child);
      child.deliver({ sy: 'bus', envelope: encodeBusMessage('c', { kind: 'hello', peerId: `p${i}` }) });
      child.deliver({ sy: 'bus', envelope: encodeBusMessage('c', { kind: 'snapshot', snapshot: { ownerId: `p${i}`, version: 1, functions: [], triggers: [] } }) });
    }
    const late = children[2]!;
    relay.attach(late);
    late.deliver({ sy: 'bus', envelope: encodeBusMessage('c', { kind: 'hello', peerId: 'p2' }) });
    expect(late.sent.map((m) => m.envelope.message.kind)).toEqual(['snapshot', 'snapshot', 'sync']);
    expect(late.sent[2].envelope.message.snapshots).toEqual([]);
  });
});
