import type { ServerResponse } from 'node:http';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ChannelRegistry } from '../../src/channels/channel-registry.js';
import type { InvocationOutcome } from '../../src/invocation/invoker.js';
import { RequestChannels } from '../../src/http/request-channels.js';

const silent = pino({ level: 'silent' });
const noControl = { pause: () => undefined, resume: () => undefined, abort: () => undefined };

/** A response nothing is written to in these cases (no stream starts). */
const res = { headersSent: false, destroyed: false, on: () => undefined, once: () => undefined } as unknown as ServerResponse;

function refsOf(channels: RequestChannels): { body: { id: string; key: string }; response: { id: string; key: string } } {
  const refs = JSON.parse(`{${channels.refsJson()}}`) as Record<'request_body' | 'response', { channel_id: string; access_key: string; direction: string }>;
  expect(refs.request_body.direction).toBe('read');
  expect(refs.response.direction).toBe('write');
  return {
    body: { id: refs.request_body.channel_id, key: refs.request_body.access_key },
    response: { id: refs.response.channel_id, key: refs.response.access_key },
  };
}

describe('RequestChannels', () => {
  it('gives both channels up when the handler answers without opening either', async () => {
    const registry = new ChannelRegistry('p', silent);
    const channels = new RequestChannels(registry, { kind: 'buffered', bytes: Buffer.from('{"a":1}') }, res, {}, false, 0);
    const refs = refsOf(channels);
    expect(registry.size).toBe(2);
    const outcome: InvocationOutcome = { ok: true, value: { status_code: 200 } };
    expect(await channels.answer(Promise.resolve(outcome), performance.now() + 1000)).toEqual({ kind: 'outcome', outcome });
    expect(registry.size).toBe(0);
    expect(registry.claim(refs.body.id, refs.body.key, 'read')).toEqual({ ok: false, reason: 'not_found' });
    expect(channels.bodyFullyRead).toBe(true);
  });

  it('serves the buffered body on request_body to a worker that opens it, then gives the channels up', async () => {
    const registry = new ChannelRegistry('p', silent);
    const channels = new RequestChannels(registry, { kind: 'buffered', bytes: Buffer.from('hello') }, res, {}, false, 0);
    const refs = refsOf(channels);
    expect(registry.claim(refs.body.id, 'not-the-key', 'read')).toEqual({ ok: false, reason: 'not_found' });
    const claimed = registry.claim(refs.body.id, refs.body.key, 'read');
    if (!claimed.ok) throw new Error('claim failed');
    const items: string[] = [];
    let ended: string | undefined;
    claimed.channel.attachReader({
      write: (data) => {
        items.push(data.toString());
        return true;
      },
      end: (status) => {
        ended = status;
      },
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(items).toEqual(['hello']);
    expect(ended).toBe('complete');
    expect(registry.claim(refs.response.id, refs.response.key, 'write').ok).toBe(true);
    const outcome: InvocationOutcome = { ok: true, value: { status_code: 204 } };
    await channels.answer(Promise.resolve(outcome), performance.now() + 1000);
    expect(registry.size).toBe(0);
  });

  it('lets go of its channels when the worker\'s response socket dies before any body', async () => {
    const registry = new ChannelRegistry('p', silent);
    const channels = new RequestChannels(registry, undefined, res, {}, false, 0);
    const refs = refsOf(channels);
    let settle: (outcome: InvocationOutcome) => void = () => undefined;
    const outcome = new Promise<InvocationOutcome>((resolve) => {
      settle = resolve;
    });
    const answered = channels.answer(outcome, performance.now() + 5000);
    const claimed = registry.claim(refs.response.id, refs.response.key, 'write');
    if (!claimed.ok) throw new Error('claim failed');
    const input = claimed.channel.attachWriter(noControl);
    input?.end('aborted', 'the worker\'s writing socket closed with 1006');
    const failure: InvocationOutcome = { ok: false, failure: { source: 'engine', code: 'WORKER_DISCONNECTED', message: 'gone' } };
    settle(failure);
    expect(await answered).toEqual({ kind: 'outcome', outcome: failure });
    expect(registry.size).toBe(0);
  });

  it('makes a channel only when a worker claims it, with the body and the engine\'s ends as if it had always been there', async () => {
    const registry = new ChannelRegistry('p', silent);
    const channels = new RequestChannels(registry, { kind: 'buffered', bytes: Buffer.from('hello') }, res, {}, false, 0);
    const refs = refsOf(channels);
    // The buffered body counts against the process's channel budget before the channel exists.
    expect(registry.bufferedBytes).toBe(5);
    // The engine holds the writing end of request_body and the reading end of response.
    expect(registry.claim(refs.body.id, refs.body.key, 'write')).toEqual({ ok: false, reason: 'in_use' });
    expect(registry.claim(refs.response.id, refs.response.key, 'read')).toEqual({ ok: false, reason: 'in_use' });
    expect(registry.bufferedBytes).toBe(5);
    const claimed = registry.claim(refs.body.id, refs.body.key, 'read');
    if (!claimed.ok) throw new Error('claim failed');
    // Now it sits in the channel's queue: counted once.
    expect(registry.bufferedBytes).toBe(5);
    const items: string[] = [];
    claimed.channel.attachReader({
      write: (data, _binary, flushed) => {
        items.push(data.toString());
        flushed();
        return true;
      },
      end: () => undefined,
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(items).toEqual(['hello']);
    expect(registry.bufferedBytes).toBe(0);
    expect(registry.claim(refs.body.id, refs.body.key, 'read')).toEqual({ ok: false, reason: 'not_found' });
    const outcome: InvocationOutcome = { ok: true, value: { status_code: 200 } };
    await channels.answer(Promise.resolve(outcome), performance.now() + 1000);
    expect(registry.bufferedBytes).toBe(0);
    expect(registry.size).toBe(0);
  });

  it('gives the reserved body bytes back when the handler answers without opening request_body', async () => {
    const registry = new ChannelRegistry('p', silent);
    const channels = new RequestChannels(registry, { kind: 'buffered', bytes: Buffer.alloc(1000) }, res, {}, false, 0);
    expect(registry.bufferedBytes).toBe(1000);
    const outcome: InvocationOutcome = { ok: true, value: { status_code: 200 } };
    await channels.answer(Promise.resolve(outcome), performance.now() + 1000);
    expect(registry.bufferedBytes).toBe(0);
  });

  it('answers from a response channel the worker opens after its handler returned nothing', async () => {
    const registry = new ChannelRegistry('p', silent);
    const channels = new RequestChannels(registry, undefined, res, {}, false, 0);
    const refs = refsOf(channels);
    const nothing: InvocationOutcome = { ok: true, value: null };
    const answered = channels.answer(Promise.resolve(nothing), performance.now() + 5000);
    await new Promise((resolve) => setImmediate(resolve));
    const claimed = registry.claim(refs.response.id, refs.response.key, 'write');
    if (!claimed.ok) throw new Error('claim failed');
    const input = claimed.channel.attachWriter(noControl);
    input?.push(Buffer.from(JSON.stringify({ type: 'set_status', status_code: 202 })), false);
    input?.end('complete', 'stream_complete');
    expect(await answered).toEqual({ kind: 'empty', status: 202, headers: [] });
    expect(registry.size).toBe(0);
  });
});
