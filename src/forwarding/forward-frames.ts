import type { Socket } from 'node:net';
import { Packr, RESERVE_START_SPACE, Unpackr } from 'msgpackr';
import { SwitchyardError } from '../errors.js';

/**
 * The forward wire's framing: `uint32 big-endian body length` + msgpack body, back to back on one
 * stream. No I/O here except `FrameWriter`, which only batches buffers into a socket. The messages
 * inside the frames, and the protocol as a whole, are described in forward-messages.ts.
 */

export const FRAME_HEADER_BYTES = 4;
/** Far above any HTTP body limit; it exists so a corrupt or hostile length cannot make us buffer gigabytes. */
export const DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024;

export type FrameErrorCode = 'FORWARD_FRAME_TOO_LARGE' | 'FORWARD_FRAME_MALFORMED';

export class FrameError extends SwitchyardError {
  declare readonly code: FrameErrorCode;
  constructor(code: FrameErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'FrameError';
  }
}

// Records (msgpackr's shared structures) would make both ends depend on per-connection state; plain
// maps keep every frame self-describing at a small size cost. copyBuffers: a binary value must not
// be a view of the frame, whose buffer is reused (see FrameDecoder).
const packr = new Packr({ useRecords: false });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, copyBuffers: true });

/**
 * Encodes one message as a whole frame in one buffer: msgpackr reserves the header bytes in front of
 * the body, so the length is written in place instead of copying the body behind a separate header.
 */
export function encodeFrame(message: unknown, maxFrameBytes = DEFAULT_MAX_FRAME_BYTES): Buffer {
  let frame: Buffer;
  try {
    frame = packr.pack(message, RESERVE_START_SPACE | FRAME_HEADER_BYTES);
  } catch (err) {
    throw new FrameError('FORWARD_FRAME_MALFORMED', 'message cannot be encoded as msgpack', { cause: err });
  }
  const bodyBytes = frame.length - FRAME_HEADER_BYTES;
  if (bodyBytes > maxFrameBytes) {
    throw new FrameError('FORWARD_FRAME_TOO_LARGE', `frame of ${bodyBytes} bytes exceeds the limit of ${maxFrameBytes}`);
  }
  frame.writeUInt32BE(bodyBytes, 0);
  return frame;
}

/** Decodes one frame body; throws a FrameError for bytes that are not exactly one msgpack value. */
export function decodeBody(body: Buffer): unknown {
  try {
    return unpackr.unpack(body);
  } catch (err) {
    throw new FrameError('FORWARD_FRAME_MALFORMED', 'frame body is not valid msgpack', { cause: err });
  }
}

// A frame that straddles chunks is assembled in a buffer the decoder keeps, up to this size: a fresh
// allocation per frame is external memory, and its churn drove V8 into frequent full GCs at 64 KiB
// payloads (about 10% more calls/s with the reused buffer). Larger frames get their own buffer.
const SCRATCH_MIN_BYTES = 64 * 1024;
const SCRATCH_MAX_BYTES = 256 * 1024;

/**
 * Splits a byte stream into frame bodies. Frames wholly inside one chunk are handed out as views of
 * that chunk (no copy); the bytes of a frame that straddles chunks are copied, once each, into an
 * assembly buffer as they arrive, so no chunk is retained after `push` returns (chunks may be a
 * reused read buffer). A body is only valid during its `onFrame` call: decode it there, do not keep it.
 */
export class FrameDecoder {
  /** Header of the incomplete frame, `headerBytes` of it received so far. */
  private readonly header = Buffer.alloc(FRAME_HEADER_BYTES);
  private headerBytes = 0;
  /** Body of the incomplete frame once its length is known; `bodyFilled` of `bodyBytes` received. */
  private body: Buffer | null = null;
  private bodyBytes = 0;
  private bodyFilled = 0;
  private scratch = Buffer.alloc(0);

  constructor(public maxFrameBytes = DEFAULT_MAX_FRAME_BYTES) {}

  /** Bytes received of an incomplete frame (at most a max-size frame). */
  get bufferedBytes(): number {
    return this.headerBytes + this.bodyFilled;
  }

  /**
   * Calls `onFrame` for every frame completed by `chunk`, in order. Throws a FrameError on a bad
   * length; the frames before it have been delivered, and the stream is unusable afterwards.
   */
  push(chunk: Buffer, onFrame: (body: Buffer) => void): void {
    let offset = 0;
    if (this.headerBytes > 0) {
      offset = this.continuePartial(chunk, onFrame);
      if (offset < 0) return;
    }
    while (chunk.length - offset >= FRAME_HEADER_BYTES) {
      const bodyBytes = this.checkLength(chunk.readUInt32BE(offset));
      const end = offset + FRAME_HEADER_BYTES + bodyBytes;
      if (end > chunk.length) break;
      onFrame(chunk.subarray(offset + FRAME_HEADER_BYTES, end));
      offset = end;
    }
    if (offset < chunk.length) {
      this.headerBytes = chunk.copy(this.header, 0, offset, offset + FRAME_HEADER_BYTES);
      if (this.headerBytes === FRAME_HEADER_BYTES) {
        this.startBody();
        this.bodyFilled = chunk.copy(this.body as Buffer, 0, offset + FRAME_HEADER_BYTES);
      }
    }
  }

  /** Feeds the incomplete frame; returns where the rest of `chunk` starts once it is complete, or -1. */
  private continuePartial(chunk: Buffer, onFrame: (body: Buffer) => void): number {
    let offset = 0;
    if (this.headerBytes < FRAME_HEADER_BYTES) {
      offset = chunk.copy(this.header, this.headerBytes, 0, FRAME_HEADER_BYTES - this.headerBytes);
      this.headerBytes += offset;
      if (this.headerBytes < FRAME_HEADER_BYTES) return -1;
      this.startBody();
    }
    const body = this.body as Buffer;
    const copied = chunk.copy(body, this.bodyFilled, offset, offset + this.bodyBytes - this.bodyFilled);
    this.bodyFilled += copied;
    if (this.bodyFilled < this.bodyBytes) return -1;
    this.headerBytes = 0;
    this.body = null;
    this.bodyFilled = 0;
    onFrame(body.subarray(0, this.bodyBytes));
    return offset + copied;
  }

  private startBody(): void {
    this.bodyBytes = this.checkLength(this.header.readUInt32BE(0));
    if (this.bodyBytes > SCRATCH_MAX_BYTES) {
      this.body = Buffer.allocUnsafe(this.bodyBytes);
      return;
    }
    if (this.scratch.length < this.bodyBytes) {
      this.scratch = Buffer.allocUnsafe(Math.max(SCRATCH_MIN_BYTES, 2 ** Math.ceil(Math.log2(this.bodyBytes))));
    }
    this.body = this.scratch;
  }

  private checkLength(bodyBytes: number): number {
    if (bodyBytes > this.maxFrameBytes) {
      throw new FrameError('FORWARD_FRAME_TOO_LARGE', `frame of ${bodyBytes} bytes exceeds the limit of ${this.maxFrameBytes}`);
    }
    // No msgpack value is zero bytes long; a zero length is a desynchronised stream.
    if (bodyBytes === 0) throw new FrameError('FORWARD_FRAME_MALFORMED', 'frame with an empty body');
    return bodyBytes;
  }
}

const asIs = (frame: Buffer): Buffer => frame;
/** A copy in memory of its own: Buffer.from would slice Node's shared 8 KiB pool for a small frame. */
const copyOf = (frame: Buffer): Buffer => {
  const copy = Buffer.allocUnsafeSlow(frame.length);
  frame.copy(copy);
  return copy;
};

/** A batch is written as soon as it holds this much, without waiting for the end of the turn. */
const BATCH_BYTES = 16 * 1024;
/** Up to this, a batch is copied into one buffer (one small write); above, it goes out as a writev. */
const COALESCE_BYTES = 32 * 1024;

/** The part of a socket the writer uses (a net.Socket; tests pass a recorder). */
export type FrameSink = Pick<Socket, 'write' | 'cork' | 'uncork' | 'destroyed' | 'writable' | 'writableLength'>;

/**
 * Batches the frames written during one turn of the event loop into a single socket write, so a
 * burst of calls or replies costs one syscall instead of one per frame.
 */
export class FrameWriter {
  private queue: Buffer[] = [];
  private queuedBytes = 0;
  private scheduled = false;
  private readonly flushBound = (): void => {
    this.flush();
  };

  constructor(private readonly socket: FrameSink) {}

  write(frame: Buffer): void {
    this.queue.push(frame);
    this.queuedBytes += frame.length;
    // A batch this big is already worth its syscall: sending it now lets the peer start on it while
    // this side is still producing the rest. Holding everything to the end of the turn made the two
    // ends work in turns (measured: about +60% calls/s at 1 KiB payloads with this cap).
    if (this.queuedBytes >= BATCH_BYTES) {
      this.flush();
      return;
    }
    if (!this.scheduled) {
      this.scheduled = true;
      // setImmediate, not nextTick: it also gathers the frames produced by the other I/O callbacks of
      // this loop iteration (calls from many HTTP requests parsed in one poll phase, replies from
      // many worker messages), where nextTick would flush once per callback. In the bench, whose
      // callers all resume in one microtask drain, the two measured within noise of each other.
      setImmediate(this.flushBound);
    }
  }

  /** Hands everything queued to the socket now (also called before ending the socket). */
  flush(): void {
    this.scheduled = false;
    const queue = this.queue;
    if (queue.length === 0) return;
    const bytes = this.queuedBytes;
    this.queue = [];
    this.queuedBytes = 0;
    if (this.socket.destroyed || !this.socket.writable) return;
    // Frames may be views of a buffer shared by many (msgpackr's, forward-binary.ts's slab). One
    // written to an idle socket leaves at once; one queued behind unsent bytes is kept until the
    // peer reads, and would keep the whole shared buffer with it: a peer that stopped reading would
    // hold a buffer per frame. So behind a backlog frames are copied.
    const keep = this.socket.writableLength > 0 ? copyOf : asIs;
    if (queue.length === 1) {
      this.socket.write(keep(queue[0] as Buffer));
    } else if (bytes <= COALESCE_BYTES) {
      this.socket.write(Buffer.concat(queue, bytes));
    } else {
      this.socket.cork();
      for (const frame of queue) this.socket.write(keep(frame));
      this.socket.uncork();
    }
  }
}
