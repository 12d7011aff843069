import { describe, expect, it } from 'vitest';
import { RedisKeyspace } from '../../src/bus/redis-keyspace.js';
import { BUS_MAX_AGE_MS, ReplayGuard } from '../../src/bus/replay-guard.js';

describe('ReplayGuard (issue 23, point 3)', () => {
  it('accepts each sequence number of a sender once, out of order within its window', () => {
    const guard = new ReplayGuard();
    const now = 1_000_000;
    expect(guard.check('a', 1, now, now)).toBe('ok');
    expect(guard.check('a', 3, now, now)).toBe('ok');
    expect(guard.check('a', 2, now, now)).toBe('ok');
    expect(guard.check('a', 2, now, now)).toBe('replayed');
    expect(guard.check('a', 3, now, now)).toBe('replayed');
    expect(guard.check('a', 200, now, now)).toBe('ok');
    expect(guard.check('a', 100, now, now)).toBe('replayed'); // below the window: cannot tell, refused
    expect(guard.check('b', 1, now, now)).toBe('ok');
  });

  it('refuses what was stamped more than the maximum age away, either way', () => {
    const guard = new ReplayGuard();
    const now = 5_000_000;
    expect(guard.check('a', 1, now - BUS_MAX_AGE_MS - 1, now)).toBe('stale');
    expect(guard.check('a', 2, now + BUS_MAX_AGE_MS + 1, now)).toBe('stale');
    expect(guard.check('a', 3, now - BUS_MAX_AGE_MS + 1000, now)).toBe('ok');
  });

  it('forgets senders silent for longer than a stale message could be', () => {
    const guard = new ReplayGuard();
    guard.check('old', 1, 0, 0);
    for (let i = 1; i <= 1024; i++) guard.check('new', i, 10 * BUS_MAX_AGE_MS, 10 * BUS_MAX_AGE_MS);
    expect(guard.size).toBe(1);
  });
});

describe('RedisKeyspace stamps (issue 23, point 3)', () => {
  const json = JSON.stringify({ v: 1, cluster: 'c', message: { kind: 'heartbeat', peerId: 'p', version: 1 } });

  it('refuses a channel message sealed once and received twice, and one from long ago; a stored key is read any number of times', () => {
    const sender = new RedisKeyspace('c', 's');
    const receiver = new RedisKeyspace('c', 's');
    const text = sender.seal(json);
    expect(receiver.decode(text)).toMatchObject({ ok: true });
    expect(receiver.decode(text)).toMatchObject({ ok: false, code: 'BUS_REPLAYED' });
    expect(receiver.decode(text, 'stored')).toMatchObject({ ok: true });
    expect(receiver.decode(text, 'stored')).toMatchObject({ ok: true });
    expect(new RedisKeyspace('c', 's').decode(sender.seal(json), 'channel', Date.now() + 2 * BUS_MAX_AGE_MS)).toMatchObject({ ok: false, code: 'BUS_STALE' });
  });

  it('covers the stamp with the HMAC: a changed sequence number or time is unauthenticated', () => {
    const text = new RedisKeyspace('c', 's').seal(json);
    const [mac, stamp] = text.split('.') as [string, string];
    const [sender, seq, ms] = stamp.split(':') as [string, string, string];
    const rest = text.slice(mac.length + stamp.length + 2);
    for (const forged of [`${sender}:${Number(seq) + 1}:${ms}`, `${sender}:${seq}:${Number(ms) + 1}`, `x${sender}:${seq}:${ms}`]) {
      expect(new RedisKeyspace('c', 's').decode(`${mac}.${forged}.${rest}`)).toMatchObject({ ok: false, code: 'BUS_UNAUTHENTICATED' });
    }
  });
});
