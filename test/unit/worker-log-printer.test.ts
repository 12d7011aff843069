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

  it("prints the worker id once the socket's metrics have named it (iii-sdk's worker gauges carry worker.id)", async () => {
    const { logger, lines } = capture();
    const printer = new WorkerLogPrinter(logger);
    const source: { workerId?: string } = {};
    const log = (msg: string) => frame([{ severityNumber: 13, body: { stringValue: msg }, spanId: 'b7ad6b7169203331', traceId: '0af7651916cd43dd8448eb211c80319c' }]);
    printer.accept('logs', log('before'), source);
    const metrics = {
      resourceMetrics: [
        {
          scopeMetrics: [
            {
              metrics: [
                { name: 'other', sum: { dataPoints: [{ asDouble: 1 }] } },
                { name: 'iii.worker.memory.rss', gauge: { dataPoints: [{ asInt: '1', attributes: [{ key: 'worker.id', value: { stringValue: 'w-42' } }] }] } },
              ],
            },
          ],
        },
      ],
    };
    // Learning the id takes nothing: the frame is still the relay's to take or drop.
    expect(printer.accept('metrics', Buffer.from(JSON.stringify(metrics)), source)).toBe(false);
    printer.accept('logs', log('after'), source);
    printer.accept('logs', log('other socket'), {});
    await new Promise((r) => setImmediate(r));
    expect(lines.map((l) => [l.msg, l.workerId, l.level, l.trace_id, l.span_id])).toEqual([
      ['before', undefined, 40, '0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331'],
      ['after', 'w-42', 40, '0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331'],
      ['other socket', undefined, 40, '0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331'],
    ]);
  });

  it('teeSinks hands a frame to every sink', () => {
    const seen: string[] = [];
    const sink = teeSinks([{ accept: () => (seen.push('a'), false) }, { accept: () => (seen.push('b'), true) }]);
    expect(sink.accept('logs', Buffer.alloc(0))).toBe(true);
    expect(seen).toEqual(['a', 'b']);
    const sources: unknown[] = [];
    const source = { workerId: 'w' };
    teeSinks([{ accept: (_k, _j, s) => (sources.push(s), false) }]).accept('logs', Buffer.alloc(0), source);
    expect(sources).toEqual([source]);
  });
});
