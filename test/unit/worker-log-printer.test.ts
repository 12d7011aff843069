import pino from 'pino';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { TelemetrySource } from '../../src/observability/otlp-relay.js';
import { RecentTraceOwners } from '../../src/observability/trace-owners.js';
import type { TraceOwner } from '../../src/observability/trace-owners.js';
import { MAX_HELD_RECORDS, MAX_QUESTIONS_PER_SOCKET, WorkerLogPrinter, printsWorkerLogs, teeSinks } from '../../src/observability/worker-log-printer.js';

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

const T1 = '0af7651916cd43dd8448eb211c80319c';
const T2 = '1bf7651916cd43dd8448eb211c80319d';
const T3 = '2cf7651916cd43dd8448eb211c80319e';
/** A record as iii-sdk's Logger sends it: inside a handler with the trace id, outside without. */
const record = (msg: string, traceId?: string) => frame([{ severityNumber: 9, body: { stringValue: msg }, ...(traceId === undefined ? {} : { traceId, spanId: 'b7ad6b7169203331' }) }]);
const printed = (lines: Record<string, unknown>[]) => lines.map((l) => [l.msg, l.workerId]);
const flush = () => new Promise((r) => setImmediate(r));

describe('WorkerLogPrinter: the worker id of a record, on one process', () => {
  it('a record is its trace\'s worker when the trace went to one worker; the socket then names records without a trace', async () => {
    const { logger, lines } = capture();
    const owners = new RecentTraceOwners();
    const printer = new WorkerLogPrinter(logger, { owners });
    const socket: TelemetrySource = {};
    printer.accept('logs', record('starting'), socket);
    printer.accept('logs', record('unknown trace', T3), socket);
    owners.note(T1, 'w-1');
    printer.accept('logs', record('in handler', T1), socket);
    printer.accept('logs', record('timer tick'), socket);
    await flush();
    expect(printed(lines)).toEqual([
      ['starting', undefined],
      ['unknown trace', undefined],
      ['in handler', 'w-1'],
      ['timer tick', 'w-1'],
    ]);
    expect(socket.workerId).toBe('w-1');
  });

  it('a trace that went to several workers names nobody: its record gets the socket\'s worker, or none', async () => {
    const { logger, lines } = capture();
    const owners = new RecentTraceOwners();
    const printer = new WorkerLogPrinter(logger, { owners });
    // w-1's handler called w-2's function under the same trace.
    owners.note(T1, 'w-1');
    owners.note(T1, 'w-2');
    const fresh: TelemetrySource = {};
    printer.accept('logs', record('shared, unknown socket', T1), fresh);
    const known: TelemetrySource = { workerId: 'w-2' };
    printer.accept('logs', record('shared, known socket', T1), known);
    await flush();
    expect(printed(lines)).toEqual([
      ['shared, unknown socket', undefined],
      ['shared, known socket', 'w-2'],
    ]);
    expect(fresh.workerId).toBeUndefined();
  });

  it('each record goes by its own trace first (a socket two workers\' records share), the socket\'s worker after', async () => {
    const { logger, lines } = capture();
    const owners = new RecentTraceOwners();
    const printer = new WorkerLogPrinter(logger, { owners });
    owners.note(T1, 'w-1');
    owners.note(T2, 'w-2');
    const socket: TelemetrySource = {};
    printer.accept('logs', record('one', T1), socket);
    printer.accept('logs', record('two', T2), socket);
    printer.accept('logs', record('none'), socket);
    await flush();
    expect(printed(lines)).toEqual([
      ['one', 'w-1'],
      ['two', 'w-2'],
      ['none', 'w-2'],
    ]);
  });

  it('a trace forgotten (past the ring) names nobody; the socket learned earlier still does', async () => {
    const { logger, lines } = capture();
    const owners = new RecentTraceOwners(2);
    const printer = new WorkerLogPrinter(logger, { owners });
    const socket: TelemetrySource = {};
    const other: TelemetrySource = {};
    owners.note(T1, 'w-1');
    printer.accept('logs', record('first', T1), socket);
    owners.note(T2, 'w-2');
    owners.note(T3, 'w-3');
    printer.accept('logs', record('late, learned socket', T1), socket);
    printer.accept('logs', record('late, new socket', T1), other);
    await flush();
    expect(printed(lines)).toEqual([
      ['first', 'w-1'],
      ['late, learned socket', 'w-1'],
      ['late, new socket', undefined],
    ]);
  });
});

/** A sibling question the test answers by hand. */
function questions(): { ask: (traceId: string) => Promise<TraceOwner>; asked: string[]; answer: (owner: TraceOwner) => void; fail: () => void } {
  const asked: string[] = [];
  const pending: { resolve: (owner: TraceOwner) => void; reject: (err: Error) => void }[] = [];
  return {
    asked,
    ask: (traceId) => {
      asked.push(traceId);
      return new Promise<TraceOwner>((resolve, reject) => pending.push({ resolve, reject }));
    },
    answer: (owner) => pending.shift()?.resolve(owner),
    fail: () => pending.shift()?.reject(new Error('the primary did not answer')),
  };
}

describe('WorkerLogPrinter: the worker id of a record, on a cluster child', () => {
  it('a socket whose trace another child sent asks once, holds its lines in order until the answer, then names them all', async () => {
    const { logger, lines } = capture();
    const owners = new RecentTraceOwners();
    const siblings = questions();
    const printer = new WorkerLogPrinter(logger, { owners, askSiblings: siblings.ask });
    const socket: TelemetrySource = {};
    printer.accept('logs', record('before any trace'), socket);
    printer.accept('logs', record('in handler', T1), socket);
    printer.accept('logs', record('another of the same', T1), socket);
    printer.accept('logs', record('outside', undefined), socket);
    printer.accept('logs', record('other trace', T2), socket);
    await flush();
    expect(siblings.asked).toEqual([T1]);
    expect(printed(lines)).toEqual([['before any trace', undefined]]);
    siblings.answer('w-1');
    await flush();
    expect(printed(lines)).toEqual([
      ['before any trace', undefined],
      ['in handler', 'w-1'],
      ['another of the same', 'w-1'],
      ['outside', 'w-1'],
      ['other trace', 'w-1'],
    ]);
    // Known now: no more questions, lines go out at once.
    printer.accept('logs', record('later', T3), socket);
    await flush();
    expect(siblings.asked).toEqual([T1]);
    expect(lines.at(-1)).toMatchObject({ msg: 'later', workerId: 'w-1' });
  });

  it('a local match is checked with the siblings: the trace may have reached a worker on another child too', async () => {
    const { logger, lines } = capture();
    const owners = new RecentTraceOwners();
    const siblings = questions();
    const printer = new WorkerLogPrinter(logger, { owners, askSiblings: siblings.ask });
    owners.note(T1, 'w-1');
    owners.note(T2, 'w-1');
    const shared: TelemetrySource = {};
    printer.accept('logs', record('w-2 called from w-1', T1), shared);
    siblings.answer('w-2'); // a sibling sent T1 to w-2: T1 names nobody
    await flush();
    expect(printed(lines)).toEqual([['w-2 called from w-1', undefined]]);
    expect(shared.workerId).toBeUndefined();
    // The next traced line asks about its own trace; nobody else had T2: the local match stands.
    printer.accept('logs', record('next', T2), shared);
    siblings.answer(undefined);
    await flush();
    expect(printed(lines).at(-1)).toEqual(['next', 'w-1']);
    expect(shared.workerId).toBe('w-1');
    expect(siblings.asked).toEqual([T1, T2]);
  });

  it('siblings that sent the trace to several workers name nobody; a trace ambiguous here is not asked about', async () => {
    const { logger, lines } = capture();
    const owners = new RecentTraceOwners();
    const siblings = questions();
    const printer = new WorkerLogPrinter(logger, { owners, askSiblings: siblings.ask });
    owners.note(T2, 'w-1');
    owners.note(T2, 'w-3');
    const socket: TelemetrySource = {};
    printer.accept('logs', record('ambiguous here', T2), socket);
    printer.accept('logs', record('ambiguous there', T1), socket);
    siblings.answer(null);
    await flush();
    expect(siblings.asked).toEqual([T1]);
    expect(printed(lines)).toEqual([
      ['ambiguous here', undefined],
      ['ambiguous there', undefined],
    ]);
  });

  it('no answer (timeout, closed link): the held lines are printed without a worker id, never dropped', async () => {
    const { logger, lines } = capture();
    const siblings = questions();
    const printer = new WorkerLogPrinter(logger, { owners: new RecentTraceOwners(), askSiblings: siblings.ask });
    const socket: TelemetrySource = {};
    printer.accept('logs', record('held', T1), socket);
    printer.accept('logs', record('held too'), socket);
    await flush();
    expect(lines).toEqual([]);
    siblings.fail();
    await flush();
    expect(printed(lines)).toEqual([
      ['held', undefined],
      ['held too', undefined],
    ]);
  });

  it('at most one question per socket at a time, the same trace never twice, and a bounded number in all', async () => {
    const { logger, lines } = capture();
    const siblings = questions();
    const printer = new WorkerLogPrinter(logger, { owners: new RecentTraceOwners(), askSiblings: siblings.ask });
    const socket: TelemetrySource = {};
    const other: TelemetrySource = {};
    const traceN = (n: number) => n.toString(16).padStart(32, 'a');
    printer.accept('logs', record('a', traceN(0)), socket);
    printer.accept('logs', record('b', traceN(1)), socket);
    printer.accept('logs', record('c', traceN(0)), other);
    await flush();
    // Each socket its own question; the second line of the first socket waits behind its question.
    expect(siblings.asked).toEqual([traceN(0), traceN(0)]);
    siblings.answer(undefined);
    await flush();
    // Its held line about another trace asks next.
    expect(siblings.asked).toEqual([traceN(0), traceN(0), traceN(1)]);
    siblings.answer(undefined);
    siblings.answer(undefined);
    await flush();
    for (let n = 0; n < MAX_QUESTIONS_PER_SOCKET + 3; n++) {
      printer.accept('logs', record(`r${n}`, traceN(n)), socket);
      siblings.answer(undefined);
      await flush();
    }
    // The first socket's questions, and the other socket's one.
    expect(siblings.asked.length).toBe(MAX_QUESTIONS_PER_SOCKET + 1);
    expect(new Set(siblings.asked).size).toBe(MAX_QUESTIONS_PER_SOCKET);
    expect(lines.every((l) => l.workerId === undefined)).toBe(true);
    expect(lines.length).toBe(3 + MAX_QUESTIONS_PER_SOCKET + 3);
  });

  it('a socket holds a bounded number of lines while it waits: past it the oldest goes out unnamed', async () => {
    const { logger, lines } = capture();
    const siblings = questions();
    const printer = new WorkerLogPrinter(logger, { owners: new RecentTraceOwners(), askSiblings: siblings.ask });
    const socket: TelemetrySource = {};
    for (let n = 0; n < MAX_HELD_RECORDS + 2; n++) printer.accept('logs', record(`r${n}`, T1), socket);
    await flush();
    expect(printed(lines)).toEqual([
      ['r0', undefined],
      ['r1', undefined],
    ]);
    siblings.answer('w-1');
    await flush();
    expect(lines.length).toBe(MAX_HELD_RECORDS + 2);
    expect(lines.slice(2).every((l) => l.workerId === 'w-1')).toBe(true);
    expect(lines.map((l) => l.msg)).toEqual(Array.from({ length: MAX_HELD_RECORDS + 2 }, (_, n) => `r${n}`));
  });

  it('metrics still name a socket, and a socket they named asks nothing', async () => {
    const { logger, lines } = capture();
    const siblings = questions();
    const printer = new WorkerLogPrinter(logger, { owners: new RecentTraceOwners(), askSiblings: siblings.ask });
    const socket: TelemetrySource = {};
    const metrics = { resourceMetrics: [{ scopeMetrics: [{ metrics: [{ name: 'iii.worker.cpu.percent', gauge: { dataPoints: [{ asDouble: 1, attributes: [{ key: 'worker.id', value: { stringValue: 'w-7' } }] }] } }] }] }] };
    printer.accept('metrics', Buffer.from(JSON.stringify(metrics)), socket);
    printer.accept('logs', record('named', T1), socket);
    await flush();
    expect(siblings.asked).toEqual([]);
    expect(printed(lines)).toEqual([['named', 'w-7']]);
  });
});
