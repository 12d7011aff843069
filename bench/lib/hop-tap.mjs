// Preloaded (`node --import`) into a server and its worker by `bench/hop-times.ts`: notes when each
// process reads and writes the bytes of one request's hops, on the machine's monotonic clock (shared by
// every process), so the times between one process's write and the other's read can be put side by
// side. SIGUSR1 writes what was noted since the previous SIGUSR1 to HOP_TAP_DIR/hop-<pid>.json and
// starts again. Kinds: 1 the HTTP server's 'request' event; 2 a WebSocket text frame written (first
// byte 0x81); 3 one read (first byte 0x81); 4 an HTTP response written ("HTTP/"); 5 an HTTP request's
// bytes read in JavaScript ("G"; the engine's framing guard reads them, Node's own parser reads them
// natively in the baseline); 0 anything else. It notes the moment a write is handed to the socket and
// a read is handed to JavaScript: the kernel's send and Node's read path lie between them.
import http from 'node:http';
import net from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.env.HOP_TAP_DIR;
if (dir !== undefined) {
  const capacity = 1 << 20;
  const times = new Float64Array(capacity);
  const kinds = new Uint8Array(capacity);
  let count = 0;
  const note = (kind) => {
    if (count === capacity) return;
    times[count] = Number(process.hrtime.bigint()) / 1000; // µs
    kinds[count++] = kind;
  };
  const firstByte = (chunk) => (typeof chunk === 'string' ? chunk.charCodeAt(0) : chunk?.length > 0 ? chunk[0] : -1);
  const writeKind = (chunk) => {
    const byte = firstByte(chunk);
    return byte === 0x81 ? 2 : byte === 0x48 ? 4 : 0;
  };
  const socket = net.Socket.prototype;
  const push = socket.push;
  socket.push = function (chunk, encoding) {
    if (chunk !== null && chunk !== undefined) {
      const byte = firstByte(chunk);
      note(byte === 0x81 ? 3 : byte === 0x47 ? 5 : 0);
    }
    return push.call(this, chunk, encoding);
  };
  const writev = socket._writev;
  socket._writev = function (chunks, callback) {
    note(writeKind(chunks[0]?.chunk));
    return writev.call(this, chunks, callback);
  };
  const write = socket._write;
  socket._write = function (chunk, encoding, callback) {
    note(writeKind(chunk));
    return write.call(this, chunk, encoding, callback);
  };
  const emit = http.Server.prototype.emit;
  http.Server.prototype.emit = function (event, ...args) {
    if (event === 'request') note(1);
    return emit.call(this, event, ...args);
  };
  process.on('SIGUSR1', () => {
    writeFileSync(join(dir, `hop-${process.pid}.json`), JSON.stringify({ times: Array.from(times.subarray(0, count)), kinds: Array.from(kinds.subarray(0, count)) }));
    count = 0;
  });
}
