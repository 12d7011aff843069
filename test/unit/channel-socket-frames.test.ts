/**
 * docs/streaming.md#the-channel-socket: what a reading worker's socket receives. A byte stream's
 * binary items handed over in one tick (the pieces of one socket read of a streamed upload) leave as
 * one frame, the same bytes in order; text items, later ticks and other channels keep one frame per
 * item; a cut stream writes none of what it had joined.
 */
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import type WebSocket from 'ws';
import { Channel, type WriterInput } from '../../src/channels/channel.js';
import { ChannelBudget } from '../../src/channels/channel-budget.js';
import { channelLimits } from '../../src/channels/channel-registry.js';
import { attachWebSocket } from '../../src/channels/ws-end.js';
import { waitUntil } from '../support/logs.js';
import { closeWsPairs, wsPair } from '../support/ws-pair.js';

const nextTick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A channel read by a real worker socket; `received` lists its messages as `b:`/`t:` + text. */
async function readingWorker(byteStream: boolean): Promise<{ input: WriterInput; channel: Channel; budget: ChannelBudget; worker: WebSocket; received: string[]; sizes: number[] }> {
  const { engine, raw, client: worker } = await wsPair();
  const budget = new ChannelBudget();
  const channel = new Channel('c-1', 'k', channelLimits(1024), () => undefined, undefined, budget, byteStream);
  const input = channel.attachWriter({ pause: () => undefined, resume: () => undefined, abort: () => undefined }) as WriterInput;
  expect(attachWebSocket(engine, raw, channel, 'read')).toBe(true);
  await nextTick();
  const received: string[] = [];
  const sizes: number[] = [];
  worker.on('message', (data: Buffer, binary: boolean) => {
    received.push(`${binary ? 'b' : 't'}:${data.toString()}`);
    sizes.push(data.length);
  });
  return { input, channel, budget, worker, received, sizes };
}

describe("a reading worker's channel socket", () => {
  afterEach(closeWsPairs);

  it("joins a byte stream's binary items of one tick into one frame, keeping text frames and their order", async () => {
    const { input, budget, worker, received } = await readingWorker(true);
    const closed = once(worker, 'close');
    input.push(Buffer.from('a'), true);
    input.push(Buffer.from('bb'), true);
    input.push(Buffer.from('ccc'), true);
    input.push(Buffer.from('text'), false);
    input.push(Buffer.from('d'), true);
    await nextTick();
    input.push(Buffer.from('x'.repeat(100)), true);
    input.push(Buffer.from('y'.repeat(100)), true);
    await nextTick();
    input.push(Buffer.from('e'), true);
    input.end('complete', 'stream_complete');
    const [code, reason] = await closed;
    expect(received).toEqual(['b:abbccc', 't:text', 'b:d', `b:${'x'.repeat(100)}${'y'.repeat(100)}`, 'b:e']);
    expect([code, String(reason)]).toEqual([1000, 'stream_complete']);
    // Every item was reported as flushed: nothing stays counted against the process's budget.
    await waitUntil(() => budget.held === 0, 5000, 'the budget given back');
  });

  it('keeps one frame per item on a channel that is not a byte stream', async () => {
    const { input, received } = await readingWorker(false);
    input.push(Buffer.from('a'), true);
    input.push(Buffer.from('bb'), true);
    input.push(Buffer.from('ccc'), true);
    await waitUntil(() => received.length === 3, 5000, 'three frames');
    expect(received).toEqual(['b:a', 'b:bb', 'b:ccc']);
  });

  it('joins no more than 256 KiB into one frame, the bytes whole and in order', async () => {
    const { input, received, sizes } = await readingWorker(true);
    const pieces = ['p', 'q', 'r', 's', 't'].map((letter) => letter.repeat(60 * 1024));
    for (const piece of pieces) input.push(Buffer.from(piece), true);
    await waitUntil(() => sizes.reduce((sum, size) => sum + size, 0) === 5 * 60 * 1024, 5000, 'every byte');
    expect(sizes).toEqual([4 * 60 * 1024, 60 * 1024]);
    expect(received.map((message) => message.slice(2)).join('')).toBe(pieces.join(''));
  });

  it('writes nothing it had joined when the stream is cut, and fails the worker', async () => {
    const { input, channel, budget, worker, received } = await readingWorker(true);
    const failed = once(worker, 'error');
    input.push(Buffer.from('never'), true);
    input.push(Buffer.from('sent'), true);
    channel.destroy('the HTTP client went away during the upload');
    const [error] = (await failed) as [Error];
    expect(error.message).toContain('1006');
    await once(worker, 'close');
    expect(received).toEqual([]);
    expect(budget.held).toBe(0);
  });
});
