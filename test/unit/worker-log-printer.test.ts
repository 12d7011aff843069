import pino from 'pino';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { WorkerLogPrinter, printsWorkerLogs, teeSinks } from '../../src/observability/worker-log-printer.js';

function capture(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'trace' }, stream), lines };
}

const frame = (records: unknown[]): Buffer =>
  Buffer.from(JSON.stringify({ resourceLogs: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'shop' } }] }, scopeLogs: [{ logRecords: records }] }] }));

describe('WorkerLogPrinter', () => {
  it('prints each record at its level with function, trace and span ids and data', async () => {
    const { logger, lines } = capture();
    const printer = new WorkerLogPrinter(logger);
    expect(printer.accept('traces', Buffer.from('{}'))).toBe(false);
    const taken = printer.accept(
      'logs',
      frame([
        {
          severityNumber: 17,
          body: { stringValue: 'payment failed' },
          traceId: '0af7651916cd43dd8448eb211c80319c',
          spanId: 'b7ad6b7169203331',
          attributes: [
            { key: 'service.name', value: { stringValue: 'api::pay' } },
            { key: 'log.data', value: { kvlistValue: { values: [{ key: 'order', value: { intValue: '7' } }, { key: 'ok', value: { boolValue: false } }] } } },
          ],
        },
        { severityNumber: 5, body: { stringValue: 'detail' }, traceId: '00000000000000000000000000000000' },
      ]),
    );
    expect(taken).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(lines[0]).toMatchObject({ level: 50, msg: 'payment failed', service: 'shop', function: 'api::pay', trace_id: '0af7651916cd43dd8448eb211c80319c', span_id: 'b7ad6b7169203331', data: { order: 7, ok: false } });
    expect(lines[1]).toMatchObject({ level: 20, msg: 'detail' });
    expect(lines[1]).not.toHaveProperty('trace_id');
    expect(printer.accept('logs', Buffer.from('not json'))).toBe(false);
  });

  it('follows logs_console_output (default on), logs_enabled and enabled', () => {
    expect(printsWorkerLogs({})).toBe(true);
    expect(printsWorkerLogs({ logs_console_output: false })).toBe(false);
    expect(printsWorkerLogs({ logs_enabled: false })).toBe(false);
    expect(printsWorkerLogs({ enabled: false })).toBe(false);
  });

  it('teeSinks hands a frame to every sink', () => {
    const seen: string[] = [];
    const sink = teeSinks([{ accept: () => (seen.push('a'), false) }, { accept: () => (seen.push('b'), true) }]);
    expect(sink.accept('logs', Buffer.alloc(0))).toBe(true);
    expect(seen).toEqual(['a', 'b']);
  });
});
