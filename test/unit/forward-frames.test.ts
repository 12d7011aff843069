import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { FrameSink } from '../../src/forwarding/forward-frames.js';
import { FrameDecoder, FrameError, FrameWriter, decodeBody, encodeFrame } from '../../src/forwarding/forward-frames.js';

/** Feeds `chunks` to a fresh decoder and returns the decoded values of every frame. */
function decodeAll(chunks: Buffer[], maxFrameBytes?: number): unknown[] {
  const decoder = new FrameDecoder(maxFrameBytes);
  const values: unknown[] = [];
  for (const chunk of chunks) decoder.push(chunk, (body) => values.push(decodeBody(body)));
  return values;
}

/** Cuts `stream` at the given offsets (any order, duplicates allowed), empty pieces included. */
function cut(stream: Buffer, offsets: number[]): Buffer[] {
  const points = [...new Set(offsets.map((o) => o % (stream.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let start = 0;
  for (const point of points) {
    chunks.push(stream.subarray(start, point));
    start = point;
  }
  chunks.push(stream.subarray(start));
  return chunks;
}

function header(length: number): Buffer {
  const h = Buffer.alloc(4);
  h.writeUInt32BE(length);
  return h;
}

function codeOf(fn: () => void): string | undefined {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(FrameError);
    return (err as FrameError).code;
  }
  return undefined;
}

// JSON-shaped values: what forwarded invocation data is (it came from JSON or a worker's JSON frame).
// msgpackr renames a `__proto__` key (a prototype-pollution guard), so such values do not round-trip.
const jsonValue = fc
  .jsonValue()
  .map((v) => JSON.stringify(v))
  .filter((text) => !text.includes('"__proto__"'))
  .map((text) => JSON.parse(text) as unknown);

describe('forward frame codec', () => {
  it('encodes a length header followed by the msgpack body, in one buffer', () => {
    const frame = encodeFrame(['hello', 1]);
    expect(frame.readUInt32BE(0)).toBe(frame.length - 4);
    expect(decodeBody(frame.subarray(4))).toEqual(['hello', 1]);
  });

  it('decodes several frames merged into one chunk, as views of that chunk', () => {
    const stream = Buffer.concat([encodeFrame({ a: 1 }), encodeFrame('two'), encodeFrame([3])]);
    const bodies: Buffer[] = [];
    new FrameDecoder().push(stream, (body) => bodies.push(body));
    expect(bodies.map(decodeBody)).toEqual([{ a: 1 }, 'two', [3]]);
    for (const body of bodies) expect(body.buffer).toBe(stream.buffer);
  });

  it('decodes a frame delivered one byte at a time, header included', () => {
    const frame = encodeFrame({ text: 'é'.repeat(300), n: [1, 2, 3] });
    const chunks = [...frame].map((byte) => Buffer.from([byte]));
    expect(decodeAll(chunks)).toEqual([{ text: 'é'.repeat(300), n: [1, 2, 3] }]);
  });

  it('keeps a partial frame until the rest arrives, then continues with what follows it', () => {
    const first = encodeFrame('x'.repeat(1000));
    const second = encodeFrame('second');
    const decoder = new FrameDecoder();
    const values: unknown[] = [];
    decoder.push(first.subarray(0, 2), (b) => values.push(decodeBody(b)));
    decoder.push(first.subarray(2, 500), (b) => values.push(decodeBody(b)));
    expect(values).toEqual([]);
    expect(decoder.bufferedBytes).toBe(500);
    decoder.push(Buffer.concat([first.subarray(500), second.subarray(0, 3)]), (b) => values.push(decodeBody(b)));
    expect(values).toEqual(['x'.repeat(1000)]);
    decoder.push(second.subarray(3), (b) => values.push(decodeBody(b)));
    expect(values).toEqual(['x'.repeat(1000), 'second']);
    expect(decoder.bufferedBytes).toBe(0);
  });

  it('decodes frames larger than the reused assembly buffer', () => {
    const values = ['y'.repeat(300_000), 'small', 'z'.repeat(70_000)];
    const stream = Buffer.concat(values.map((v) => encodeFrame(v)));
    const offsets = Array.from({ length: 12 }, (_, i) => Math.floor((stream.length * (i + 1)) / 13));
    expect(decodeAll(cut(stream, offsets))).toEqual(values);
  });

  it('decodes binary values as copies, so reusing the assembly buffer cannot change them', () => {
    const frames = [encodeFrame({ bin: Buffer.alloc(100_000, 1) }), encodeFrame({ bin: Buffer.alloc(100_000, 2) })];
    const stream = Buffer.concat(frames);
    const values = decodeAll(cut(stream, [50_000, 100_010, 150_000])) as { bin: Uint8Array }[];
    expect(values.map((v) => [v.bin.length, v.bin[0], v.bin[99_999]])).toEqual([
      [100_000, 1, 1],
      [100_000, 2, 2],
    ]);
  });

  it('any chunking of a valid frame stream decodes to the same frames', () => {
    fc.assert(
      fc.property(fc.array(jsonValue, { minLength: 1, maxLength: 20 }), fc.array(fc.nat(), { maxLength: 40 }), (values, offsets) => {
        const stream = Buffer.concat(values.map((v) => encodeFrame(v)));
        expect(decodeAll(cut(stream, offsets))).toEqual(values);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses a length over the limit as soon as the header is complete, without buffering the body', () => {
    const decoder = new FrameDecoder(1024);
    expect(codeOf(() => decoder.push(header(1025).subarray(0, 3), () => undefined))).toBeUndefined();
    expect(codeOf(() => decoder.push(header(1025).subarray(3), () => undefined))).toBe('FORWARD_FRAME_TOO_LARGE');
    expect(codeOf(() => new FrameDecoder(1024).push(header(0xffffffff), () => undefined))).toBe('FORWARD_FRAME_TOO_LARGE');
  });

  it('delivers the frames before a bad length, then fails', () => {
    const values: unknown[] = [];
    const stream = Buffer.concat([encodeFrame('ok'), header(10_000)]);
    expect(codeOf(() => new FrameDecoder(100).push(stream, (b) => values.push(decodeBody(b))))).toBe('FORWARD_FRAME_TOO_LARGE');
    expect(values).toEqual(['ok']);
  });

  it('refuses an empty frame and a body that is not exactly one msgpack value', () => {
    expect(codeOf(() => new FrameDecoder().push(header(0), () => undefined))).toBe('FORWARD_FRAME_MALFORMED');
    expect(codeOf(() => decodeBody(Buffer.from([0x92, 0x01])))).toBe('FORWARD_FRAME_MALFORMED'); // array of 2, one element
    expect(codeOf(() => decodeBody(Buffer.from([0x01, 0x02])))).toBe('FORWARD_FRAME_MALFORMED'); // trailing byte
  });

  it('refuses to encode a frame over the limit', () => {
    expect(codeOf(() => encodeFrame('x'.repeat(2000), 1000))).toBe('FORWARD_FRAME_TOO_LARGE');
  });

  it('never throws anything but a FrameError on garbage, and never holds more than a frame', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 20 }), (chunks) => {
        const decoder = new FrameDecoder(256);
        try {
          for (const chunk of chunks) {
            decoder.push(Buffer.from(chunk), (body) => {
              try {
                decodeBody(body);
              } catch (err) {
                expect(err).toBeInstanceOf(FrameError);
              }
            });
            expect(decoder.bufferedBytes).toBeLessThanOrEqual(256 + 4 + 64);
          }
        } catch (err) {
          expect(err).toBeInstanceOf(FrameError);
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('FrameWriter', () => {
  class RecordingSink implements FrameSink {
    writes: Buffer[] = [];
    corked = 0;
    destroyed = false;
    writable = true;
    writableLength = 0;
    write = ((chunk: Buffer): boolean => {
      this.writes.push(chunk);
      return true;
    }) as FrameSink['write'];
    cork(): void {
      this.corked += 1;
    }
    uncork(): void {}
  }
  const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

  it('writes the frames of one turn of the event loop as one buffer', async () => {
    const sink = new RecordingSink();
    const writer = new FrameWriter(sink);
    const frames = [encodeFrame(1), encodeFrame('two'), encodeFrame([3])];
    for (const frame of frames) writer.write(frame);
    expect(sink.writes).toEqual([]);
    await nextTurn();
    expect(sink.writes).toEqual([Buffer.concat(frames)]);
    writer.write(frames[0] as Buffer);
    await nextTurn();
    expect(sink.writes).toHaveLength(2);
  });

  it('writes a batch as soon as it reaches 16 KiB, without waiting for the end of the turn', () => {
    const sink = new RecordingSink();
    const writer = new FrameWriter(sink);
    const small = encodeFrame('a'.repeat(1000));
    for (let i = 0; i < 16; i++) writer.write(small);
    expect(sink.writes).toEqual([]);
    writer.write(small); // 17 KB queued
    expect(sink.writes).toEqual([Buffer.concat(Array.from({ length: 17 }, () => small))]);
  });

  it('sends a large batch as corked separate writes instead of copying it', () => {
    const sink = new RecordingSink();
    const writer = new FrameWriter(sink);
    const big = [encodeFrame('a'.repeat(10_000)), encodeFrame('b'.repeat(30_000))];
    for (const frame of big) writer.write(frame);
    expect(sink.writes).toEqual(big);
    expect(sink.corked).toBe(1);
  });

  it('copies frames that would wait behind unsent bytes, so they do not keep a shared buffer', async () => {
    const shared = Buffer.alloc(64 * 1024);
    const frame = shared.subarray(0, 16).fill(7);
    const big = [shared.subarray(0, 20_000), shared.subarray(20_000, 60_000)];
    const sink = new RecordingSink();
    const writer = new FrameWriter(sink);
    writer.write(frame);
    await nextTurn();
    // An idle socket sends at once: the view itself.
    expect(sink.writes[0]?.buffer).toBe(shared.buffer);
    sink.writableLength = 100;
    writer.write(frame);
    await nextTurn();
    for (const piece of big) writer.write(piece);
    const [single, ...corked] = sink.writes.slice(1);
    expect(single).toEqual(frame);
    expect(corked).toEqual(big);
    // Copies of their own size: not slices of a shared buffer (Node's pool included).
    for (const written of [single, ...corked]) {
      expect(written?.buffer).not.toBe(shared.buffer);
      expect(written?.buffer.byteLength).toBe(written?.length);
    }
  });

  it('drops what is queued once the socket is destroyed', async () => {
    const sink = new RecordingSink();
    const writer = new FrameWriter(sink);
    writer.write(encodeFrame(1));
    sink.destroyed = true;
    await nextTurn();
    expect(sink.writes).toEqual([]);
  });
});
