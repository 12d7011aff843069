import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import type { InvocationOutcome, Invoker } from '../../src/invocation/invoker.js';
import { RawJson, toJson } from '../../src/invocation/raw-json.js';

/**
 * The HTTP/1.1 alternative to the framed stream, built as it would be in src/: one POST per call,
 * the call data as the JSON body (what the worker frame needs anyway), the function id and the
 * remaining deadline in headers, the outcome as a JSON body, keep-alive connections from an undici Pool.
 */
export function startHttpHop(socketPath: string, invoker: Invoker): Promise<Server> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const text = (chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)).toString('utf8');
      const deadline = performance.now() + Number(req.headers['x-remaining-ms']);
      void invoker.invoke(String(req.headers['x-function-id']), new RawJson(text), { deadline }).then((outcome) => {
        const body = JSON.stringify(outcome);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      });
    });
  });
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve) => server.listen(socketPath, () => resolve(server)));
}

export class HttpHopClient {
  private readonly pool: Pool;

  constructor(socketPath: string, connections: number) {
    this.pool = new Pool('http://forward.local', { socketPath, connections, pipelining: 1 });
  }

  async invoke(functionId: string, data: unknown, deadline: number): Promise<InvocationOutcome> {
    const { body } = await this.pool.request({
      path: '/invoke',
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-function-id': functionId,
        'x-remaining-ms': String(Math.ceil(deadline - performance.now())),
      },
      body: toJson(data),
    });
    return JSON.parse(await body.text()) as InvocationOutcome;
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
