import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { ChannelEndStatus, ChannelReader, ReaderFeedback, WriterInput } from '../../src/channels/channel.js';
import { Channel } from '../../src/channels/channel.js';
import { ChannelBudget } from '../../src/channels/channel-budget.js';
import { channelAttachDecision } from '../../src/channels/channel-attach.js';
import { parseChannelTarget } from '../../src/channels/channel-endpoint.js';
import { tunnelLinkResult } from '../../src/forwarding/tunnel-client.js';
import { ChannelRegistry, channelLimits, MAX_BUFFER_ITEMS, ownerTag, ownerTagOfChannel } from '../../src/channels/channel-registry.js';
import { normalizeApiPath } from '../../src/routing/path-pattern.js';
import { normalizeTriggerPaths } from '../../src/routing/trigger-config.js';

const silent = pino({ level: 'silent' });
const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A reader that records what it gets and says "busy" while `busy` is set. */
function recordingReader(): ChannelReader & { items: string[]; ended?: [ChannelEndStatus, string]; busy: boolean } {
  const reader = {
    items: [] as string[],
    ended: undefined as [ChannelEndStatus, string] | undefined,
    busy: false,
    write(data: Buffer, binary: boolean) {
      reader.items.push(`${binary ? 'b' : 't'}:${data.toString()}`);
      return !reader.busy;
    },
    end(status: ChannelEndStatus, reason: string) {
      reader.ended = [status, reason];
    },
  };
  return reader;
}

function writer(): { control: { pause(): void; resume(): void; abort(reason: string): void }; paused: boolean; aborted?: string } {
  const state = {
    paused: false,
    aborted: undefined as string | undefined,
    control: {
      pause: () => {
        state.paused = true;
      },
      resume: () => {
        state.paused = false;
      },
      abort: (reason: string) => {
        state.aborted = reason;
      },
    },
  };
  return state;
}

describe('Channel', () => {
  it('queues what the writer sends before the reader comes, then delivers it in order with the end', async () => {
    let settled = 0;
    const channel = new Channel('c', 'k', channelLimits(8), () => settled++);
    const w = writer();
    const input = channel.attachWriter(w.control) as WriterInput;
    input.push(Buffer.from('{"type":"set_status"}'), false);
    input.push(Buffer.from('one'), true);
    input.end('complete', 'stream_complete');
    expect(settled).toBe(0);
    const reader = recordingReader();
    channel.attachReader(reader);
    await flush();
    expect(reader.items).toEqual(['t:{"type":"set_status"}', 'b:one']);
    expect(reader.ended).toEqual(['complete', 'stream_complete']);
    expect(settled).toBe(1);
  });

  it('pauses the writer when the queue is full and resumes it once the reader took the items', async () => {
    const channel = new Channel('c', 'k', channelLimits(2), () => undefined);
    const w = writer();
    const input = channel.attachWriter(w.control) as WriterInput;
    input.push(Buffer.from('a'), true);
    expect(w.paused).toBe(false);
    input.push(Buffer.from('b'), true);
    expect(w.paused).toBe(true);
    channel.attachReader(recordingReader());
    await flush();
    expect(w.paused).toBe(false);
  });

  it('pauses the writer while the reader is busy and resumes it on drained', async () => {
    const channel = new Channel('c', 'k', channelLimits(64), () => undefined);
    const w = writer();
    const input = channel.attachWriter(w.control) as WriterInput;
    const reader = recordingReader();
    const feedback = channel.attachReader(reader) as ReaderFeedback;
    await flush();
    reader.busy = true;
    input.push(Buffer.from('1'), true);
    input.push(Buffer.from('2'), true);
    expect(w.paused).toBe(true);
    expect(reader.items).toEqual(['b:1']);
    reader.busy = false;
    feedback.drained();
    expect(reader.items).toEqual(['b:1', 'b:2']);
    expect(w.paused).toBe(false);
  });

  it('bounds the queue by bytes as well as items', () => {
    const channel = new Channel('c', 'k', { maxQueuedItems: 1000, maxQueuedBytes: 10 }, () => undefined);
    const w = writer();
    const input = channel.attachWriter(w.control) as WriterInput;
    input.push(Buffer.alloc(6), true);
    expect(w.paused).toBe(false);
    input.push(Buffer.alloc(6), true);
    expect(w.paused).toBe(true);
  });

  it('refuses an item larger than the whole buffer instead of queueing it whole (issue 23, point 5)', () => {
    const channel = new Channel('c', 'k', { maxQueuedItems: 1000, maxQueuedBytes: 10 }, () => undefined);
    const w = writer();
    const input = channel.attachWriter(w.control) as WriterInput;
    input.push(Buffer.alloc(11), true);
    expect(w.aborted).toMatch(/larger than the channel's buffer/);
  });

  it('aborts the writer when the reader goes away, and refuses a second claim of either end', () => {
    let settled = 0;
    const channel = new Channel('c', 'k', channelLimits(), () => settled++);
    const w = writer();
    channel.attachWriter(w.control);
    expect(channel.attachWriter(writer().control)).toBeUndefined();
    const feedback = channel.attachReader(recordingReader()) as ReaderFeedback;
    expect(channel.attachReader(recordingReader())).toBeUndefined();
    feedback.gone('client left');
    expect(w.aborted).toBe('client left');
    expect(settled).toBe(1);
  });

  it('tells the reader of an aborted writer, and cuts a writer past its byte bound', async () => {
    const channel = new Channel('c', 'k', channelLimits(), () => undefined, 5);
    const w = writer();
    const input = channel.attachWriter(w.control) as WriterInput;
    const reader = recordingReader();
    channel.attachReader(reader);
    await flush();
    input.push(Buffer.from('12345'), true);
    input.push(Buffer.from('6'), true);
    expect(w.aborted).toBe('more than 5 bytes');
    expect(reader.ended).toEqual(['aborted', 'more than 5 bytes']);
  });

  it('destroy() ends both sides as aborted', () => {
    const channel = new Channel('c', 'k', channelLimits(), () => undefined);
    const w = writer();
    channel.attachWriter(w.control);
    const reader = recordingReader();
    channel.attachReader(reader);
    channel.destroy('request over');
    expect(w.aborted).toBe('request over');
    expect(reader.ended).toEqual(['aborted', 'request over']);
    expect(channel.isSettled).toBe(true);
  });
});

describe('the process channel budget (issue 23, point 5)', () => {
  /** A reader that takes items but flushes them only when told (a socket nobody reads). */
  function holdingReader(): ChannelReader & { items: number; pending: (() => void)[] } {
    const reader = {
      items: 0,
      pending: [] as (() => void)[],
      write(_data: Buffer, _binary: boolean, flushed: () => void) {
        reader.items++;
        reader.pending.push(flushed);
        return true;
      },
      end() {},
    };
    return reader;
  }
  const kib = (n: number): Buffer => Buffer.alloc(n * 1024);

  it('counts queued and unflushed bytes, and past the bound queues nothing beyond the item in hand', async () => {
    const budget = new ChannelBudget(64 * 1024);
    const hog = new Channel('hog', 'k', channelLimits(), () => undefined, undefined, budget);
    const w = writer();
    const input = hog.attachWriter(w.control) as WriterInput;
    const stuck = holdingReader();
    hog.attachReader(stuck);
    await flush();
    for (let i = 0; i < 4; i++) input.push(kib(32), true);
    // Two items reach the reader (the second takes the budget to its bound), the third is queued and the writer waits.
    expect(stuck.items).toBe(2);
    expect(budget.held).toBe(4 * 32 * 1024);
    expect(budget.full).toBe(true);
    expect(w.paused).toBe(true);
    // Another channel whose reader keeps up goes on, one item in flight at a time.
    const other = new Channel('ok', 'k', channelLimits(), () => undefined, undefined, budget);
    const w2 = writer();
    const input2 = other.attachWriter(w2.control) as WriterInput;
    const got: number[] = [];
    other.attachReader({ write: (data, _b, flushed) => (got.push(data.length), flushed(), true), end: () => undefined });
    await flush();
    for (let i = 0; i < 10; i++) input2.push(kib(16), true);
    expect(got.length).toBe(10);
    expect(w2.paused).toBe(false);
    // The stuck reader flushes: the hog's queue moves on, one item in flight while the budget is spent, and its writer resumes.
    for (const done of stuck.pending.splice(0)) done();
    expect(stuck.items).toBe(3);
    for (const done of stuck.pending.splice(0)) done();
    expect(stuck.items).toBe(4);
    expect(w.paused).toBe(false);
    hog.destroy('test over');
    other.destroy('test over');
    expect(budget.held).toBe(0);
  });

  it('gives back what a torn-down channel held, and ignores its late flushes', async () => {
    const budget = new ChannelBudget(1024 * 1024);
    const channel = new Channel('c', 'k', channelLimits(), () => undefined, undefined, budget);
    const input = channel.attachWriter(writer().control) as WriterInput;
    const stuck = holdingReader();
    channel.attachReader(stuck);
    await flush();
    input.push(kib(100), true);
    expect(budget.held).toBe(100 * 1024);
    channel.destroy('gone');
    expect(budget.held).toBe(0);
    for (const done of stuck.pending) done();
    expect(budget.held).toBe(0);
  });
});

describe('ChannelRegistry', () => {
  it('names channels after their owner and checks keys and free ends', () => {
    const registry = new ChannelRegistry('node/0/epoch', silent);
    const channel = registry.create();
    expect(ownerTagOfChannel(channel.id)).toBe(ownerTag('node/0/epoch'));
    expect(ownerTagOfChannel('not-a-channel')).toBeUndefined();
    expect(registry.claim(channel.id, 'wrong', 'read')).toEqual({ ok: false, reason: 'not_found' });
    expect(registry.claim('nope', channel.key, 'read')).toEqual({ ok: false, reason: 'not_found' });
    const claimed = registry.claim(channel.id, channel.key, 'read');
    expect(claimed.ok).toBe(true);
    if (claimed.ok) claimed.channel.attachReader(recordingReader());
    expect(registry.claim(channel.id, channel.key, 'read')).toEqual({ ok: false, reason: 'in_use' });
    expect(registry.claim(channel.id, channel.key, 'write').ok).toBe(true);
  });

  it('expires channels with an unclaimed end after the TTL, and only expiring ones', () => {
    const registry = new ChannelRegistry('p', silent, 1000);
    const request = registry.create();
    const shared = registry.create({ expires: true });
    const used = registry.create({ expires: true });
    used.attachReader(recordingReader());
    used.attachWriter(writer().control);
    const now = Date.now();
    expect(registry.sweep(now + 500)).toBe(0);
    expect(registry.sweep(now + 2000)).toBe(1);
    expect(registry.claim(shared.id, shared.key, 'read')).toEqual({ ok: false, reason: 'not_found' });
    expect(registry.claim(request.id, request.key, 'read').ok).toBe(true);
    registry.close();
    expect(registry.size).toBe(0);
  });

  it('makes a reserved channel on the first claim with its key, and never after it was released', () => {
    const registry = new ChannelRegistry('p', silent);
    const made: string[] = [];
    const pair = registry.reservePair('k', {
      makeChannel: (reservedId) => {
        made.push(reservedId);
        return registry.create({}, 'k', reservedId);
      },
    });
    const { first: id, second } = pair;
    expect(id.startsWith(`${registry.tag}-`)).toBe(true);
    expect(second.startsWith(`${registry.tag}-`)).toBe(true);
    expect(second).not.toBe(id);
    expect(registry.size).toBe(2);
    expect(registry.claim(id, 'wrong', 'read')).toEqual({ ok: false, reason: 'not_found' });
    expect(made).toEqual([]);
    const claimed = registry.claim(id, 'k', 'read');
    expect(claimed.ok && claimed.channel.id).toBe(id);
    expect(made).toEqual([id]);
    expect(registry.claim(id, 'k', 'write').ok).toBe(true);
    expect(made).toEqual([id]);
    expect(registry.size).toBe(2);
    // The pair's other id is still reserved; it is made on its own first claim.
    const other = registry.claim(second, 'k', 'write');
    expect(other.ok && other.channel.id).toBe(second);
    expect(made).toEqual([id, second]);
    expect(registry.size).toBe(2);
    const released = registry.reservePair('k', {
      makeChannel: () => {
        throw new Error('released reservations are never made');
      },
    });
    registry.release(released, released.first);
    expect(registry.claim(released.first, 'k', 'read')).toEqual({ ok: false, reason: 'not_found' });
    expect(registry.size).toBe(3);
    registry.release(released, released.first); // twice: nothing more
    expect(registry.size).toBe(3);
    registry.release(released, released.second);
    expect(registry.claim(released.second, 'k', 'write')).toEqual({ ok: false, reason: 'not_found' });
    expect(registry.size).toBe(2);
  });

  it('finds a reserved id only by its exact text: not a neighbour, another tag or another spelling of its number', () => {
    const registry = new ChannelRegistry('p', silent);
    const maker = {
      makeChannel: () => {
        throw new Error('never made');
      },
    };
    registry.create();
    const pair = registry.reservePair('k', maker);
    const next = registry.reservePair('k', maker);
    const number = pair.first.slice(registry.tag.length + 1);
    for (const id of [`${registry.tag}-0${number}`, `${registry.tag}-${number.toUpperCase()}x`, `${registry.tag}x${number}`, `ffffffffffff-${number}`, `${registry.tag}-`, `${registry.tag}-${(parseInt(number, 36) + 4).toString(36)}`, '']) {
      expect(registry.claim(id, 'k', 'read')).toEqual({ ok: false, reason: 'not_found' });
    }
    expect(registry.size).toBe(5);
    registry.release(next, next.first);
    registry.release(next, next.second);
    registry.release(pair, pair.first);
    registry.release(pair, pair.second);
    expect(registry.size).toBe(1);
  });

  it("clamps a channel's buffer to 1..1024 items, as iii", () => {
    expect(channelLimits(0).maxQueuedItems).toBe(1);
    expect(channelLimits(5000).maxQueuedItems).toBe(MAX_BUFFER_ITEMS);
  });
});

describe('channel links between processes', () => {
  it('a peer may attach only a free end with the right key', () => {
    const registry = new ChannelRegistry('p1', silent);
    const channel = registry.create();
    const ask = (channelId: string, key: string) => channelAttachDecision(registry, { channelId, key, direction: 'read', peerId: 'p2' });
    expect(ask('nope', channel.key)).toEqual({ refused: 'not_found' });
    expect(ask(channel.id, 'wrong')).toEqual({ refused: 'not_found' });
    expect('attach' in ask(channel.id, channel.key)).toBe(true);
    channel.attachReader(recordingReader());
    expect(ask(channel.id, channel.key)).toEqual({ refused: 'in_use' });
    registry.close();
  });

  it('counts a peer saying no as refused and anything else that failed as failed', () => {
    expect(tunnelLinkResult({ ok: false, reason: 'not_found' })).toBe('refused');
    expect(tunnelLinkResult({ ok: false, reason: 'in_use' })).toBe('refused');
    expect(tunnelLinkResult({ ok: false, reason: 'connect ECONNREFUSED' })).toBe('failed');
  });
});

describe('channel endpoint targets', () => {
  it('parses id, key and direction, and says what is wrong otherwise', () => {
    expect(parseChannelTarget('/ws/channels/abc-1?key=k%2B1&dir=write')).toEqual({ channelId: 'abc-1', key: 'k+1', direction: 'write' });
    expect(parseChannelTarget('/ws/channels/abc-1?dir=read')).toBe('missing key');
    expect(parseChannelTarget('/ws/channels/abc-1?key=k&dir=up')).toBe('dir must be read or write');
    expect(parseChannelTarget('/ws/channels/?key=k&dir=read')).toBe('missing channel id');
  });
});

describe('api_path as iii reads it', () => {
  it('makes the leading slash optional and collapses several, keeping inner and trailing slashes', () => {
    expect(normalizeApiPath('test/hello')).toBe('/test/hello');
    expect(normalizeApiPath('/test/hello')).toBe('/test/hello');
    expect(normalizeApiPath('//test//hello/')).toBe('/test//hello/');
    expect(normalizeApiPath('')).toBe('/');
  });

  it('applies to http_middleware scope.path; an http api_path stays as registered (trigger.path), read normalized by validateTrigger', () => {
    expect(normalizeTriggerPaths('http', { api_path: 'a/:id', http_method: 'GET' })).toEqual({ api_path: 'a/:id', http_method: 'GET' });
    expect(normalizeTriggerPaths('http_middleware', { phase: 'onRequest', scope: { path: 'api/*' } })).toEqual({ phase: 'onRequest', scope: { path: '/api/*' } });
    const odd = { api_path: 7 };
    expect(normalizeTriggerPaths('http', odd)).toBe(odd);
  });
});
