import { connect } from 'node:net';
import type { Socket } from 'node:net';

/**
 * HTTP/1.1 over a bare TCP socket, for what a client library hides: a Content-Length with no body, a
 * chunked body that never ends, a request written on a connection that is already busy.
 */
export interface RawResponse {
  status: number;
  /** Lower-case names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  text: string;
}

export class RawConnection {
  private readonly socket: Socket;
  private readonly chunks: Buffer[] = [];
  /** Every response the server sent, parsed once the server closes the connection. */
  readonly closed: Promise<RawResponse[]>;
  private readonly connected: Promise<void>;

  constructor(url: string, timeoutMs = 10_000) {
    const { hostname, port } = new URL(url);
    this.socket = connect({ host: hostname, port: Number(port) });
    this.connected = new Promise((resolve, reject) => {
      this.socket.once('connect', resolve);
      this.socket.once('error', reject);
    });
    this.closed = new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.socket.destroy();
        reject(new Error(`raw connection to ${url} still open after ${timeoutMs} ms; got ${Buffer.concat(this.chunks).toString('latin1').slice(0, 300)}`));
      }, timeoutMs);
      this.socket.on('data', (chunk: Buffer) => this.chunks.push(chunk));
      this.socket.on('error', () => undefined); // a reset after the last response still ends in 'close'
      this.socket.once('close', () => {
        clearTimeout(timer);
        try {
          resolve(parseResponses(Buffer.concat(this.chunks)));
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
    });
  }

  async write(data: string | Buffer): Promise<void> {
    await this.connected;
    await new Promise<void>((resolve, reject) => this.socket.write(data, (err) => (err ? reject(err) : resolve())));
  }
}

/** Writes `data` on a new connection and returns the responses sent before the server closed it. */
export async function rawHttp(url: string, data: string | Buffer, timeoutMs?: number): Promise<RawResponse[]> {
  const connection = new RawConnection(url, timeoutMs);
  await connection.write(data);
  return connection.closed;
}

/** Splits what a server sent into responses (Content-Length framing; the last one may run to the end). */
export function parseResponses(bytes: Buffer): RawResponse[] {
  const out: RawResponse[] = [];
  let offset = 0;
  while (offset < bytes.length) {
    const end = bytes.indexOf('\r\n\r\n', offset, 'latin1');
    if (end === -1) throw new Error(`incomplete response head: ${bytes.subarray(offset).toString('latin1').slice(0, 200)}`);
    const [statusLine = '', ...lines] = bytes.subarray(offset, end).toString('latin1').split('\r\n');
    const status = Number(statusLine.split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    const start = end + 4;
    const length = status === 204 || status === 304 ? 0 : Number(headers['content-length'] ?? bytes.length - start);
    out.push({ status, headers, text: bytes.subarray(start, start + length).toString('utf8') });
    offset = start + length;
  }
  return out;
}
