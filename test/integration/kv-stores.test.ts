// The three kv stores the state and stream modules write through (docs/modules.md#where-data-lives),
// held to the same cases: the in-memory store, the primary-held store reached over IPC (KvHost and
// a child's IpcKvLink, over an in-memory channel that serialises as node:cluster does), and Redis.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IpcRequester, answerIpcRequests } from '../../src/bus/ipc-requests.js';
import { IpcKvLink } from '../../src/modules/storage/ipc-kv-store.js';
import type { KvChange, KvStore } from '../../src/modules/storage/kv-store.js';
import { MemoryKvStore } from '../../src/modules/storage/memory-kv-store.js';
import { RedisKvStore } from '../../src/modules/storage/redis-kv-store.js';
import { ValueTooLargeError } from '../../src/modules/storage/update-ops.js';
import { KvHost } from '../../src/supervisor/kv-host.js';
import { memoryLink } from '../support/memory-ipc.js';
import type { RedisServer } from '../support/redis.js';
import { startRedisServer } from '../support/redis.js';

const logger = pino({ level: 'silent' });

interface Subject {
  store: KvStore;
  close(): Promise<void>;
}

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedisServer();
}, 30_000);
afterAll(async () => {
  await redis?.stop();
});

const subjects: [string, () => Promise<Subject>][] = [
  ['memory', () => Promise.resolve({ store: new MemoryKvStore(), close: () => Promise.resolve() })],
  [
    'primary-held over IPC',
    () => {
      const host = new KvHost(new Map([['memory', { kind: 'memory' as const }]]), logger);
      const link = memoryLink();
      host.attach(link.primary);
      const child = new IpcKvLink(link.child);
      return Promise.resolve({
        store: child.store('memory'),
        close: () => {
          child.close();
          host.detach(link.primary);
          return Promise.resolve();
        },
      });
    },
  ],
  [
    'redis',
    async () => {
      const store = new RedisKvStore({ url: redis.url, keyPrefix: `kv${Math.random().toString(36).slice(2, 8)}:`, logger });
      await store.start();
      return { store, close: () => store.close() };
    },
  ],
];

describe.each(subjects)('kv store: %s', (_name, open) => {
  let subject: Subject;
  beforeAll(async () => {
    subject = await open();
  });
  afterAll(async () => {
    await subject?.close();
  });

  it('update refuses a result over maxValueBytes (VALUE_TOO_LARGE), writes nothing and announces nothing', async () => {
    const { store } = subject;
    const changes: KvChange[] = [];
    store.watch('capped', (change) => changes.push(change));
    // Redis subscribes in the background: a message that comes back says the watch is live.
    while (!changes.some((c) => c.kind === 'message')) {
      await store.notify('capped', 'probe', 'p', 1);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const grow = [{ type: 'append' as const, path: 'log', value: 'x'.repeat(40) }];
    // Each append is small; the value they build is not: the cap is on what would be stored.
    expect((await store.update('capped', 'g', 'k', grow, 100)).new_value).toEqual({ log: 'x'.repeat(40) });
    expect((await store.update('capped', 'g', 'k', grow, 100)).new_value).toEqual({ log: 'x'.repeat(80) });
    const refused = store.update('capped', 'g', 'k', grow, 100);
    await expect(refused).rejects.toMatchObject({ code: 'VALUE_TOO_LARGE', message: expect.stringMatching(/value of 130 bytes exceeds the configured max_value_bytes limit of 100/) });
    expect(await store.get('capped', 'g', 'k')).toEqual({ log: 'x'.repeat(80) });
    // A new key refused at once leaves no empty group behind.
    await expect(store.update('capped', 'fresh', 'k', [{ type: 'set', path: 'v', value: 'y'.repeat(200) }], 100)).rejects.toMatchObject({ code: 'VALUE_TOO_LARGE' });
    expect(await store.listGroups('capped')).toEqual(['g']);
    // Without a limit the same update applies.
    expect((await store.update('capped', 'g', 'k', grow)).new_value).toEqual({ log: 'x'.repeat(120) });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(changes.filter((c) => c.kind !== 'message').map((c) => [c.group, c.kind])).toEqual([
      ['g', 'created'],
      ['g', 'updated'],
      ['g', 'updated'],
    ]);
  });
});

describe('IPC request helper (src/bus/ipc-requests.ts)', () => {
  it('answers in any order, carries an error\'s code back, and fails a request that is never answered', async () => {
    const link = memoryLink();
    const unsubscribe = answerIpcRequests(
      link.primary,
      't',
      (m): m is Record<string, unknown> & { op: string } => typeof m.op === 'string',
      ({ op }) => {
        if (op === 'slow') return new Promise((resolve) => setTimeout(() => resolve('slow'), 50));
        if (op === 'big') throw new ValueTooLargeError(10, 5);
        if (op === 'never') return new Promise(() => undefined);
        return op;
      },
    );
    const requester = new IpcRequester<{ op: string }>(link.child, 't', 300, ({ op }) => `t ${op}`);
    const slow = requester.request({ op: 'slow' });
    expect(await requester.request({ op: 'fast' })).toBe('fast');
    expect(await slow).toBe('slow');
    await expect(requester.request({ op: 'big' })).rejects.toMatchObject({ code: 'VALUE_TOO_LARGE', message: 'value of 10 bytes exceeds the configured max_value_bytes limit of 5' });
    await expect(requester.request({ op: 'never' })).rejects.toThrow('the primary did not answer t never within 300 ms');
    const pending = requester.request({ op: 'never' });
    requester.close();
    await expect(pending).rejects.toThrow('the t link closed');
    await expect(requester.request({ op: 'fast' })).rejects.toThrow('closed');
    unsubscribe();
  });
});
