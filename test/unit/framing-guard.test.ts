import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FramingGuard } from '../../src/http/framing-guard.js';
import { cleanHeadFraming, exactHeadFraming } from '../../src/http/request-head.js';
import { ReferenceFramingGuard } from '../support/framing-guard-reference.js';

const scanAll = (text: string, splitAt: number[] = []): ReturnType<FramingGuard['scan']>[] => {
  const guard = new FramingGuard();
  const bytes = Buffer.from(text, 'latin1');
  const cuts = [0, ...splitAt.filter((n) => n > 0 && n < bytes.length).sort((a, b) => a - b), bytes.length];
  const verdicts = [];
  for (let i = 0; i + 1 < cuts.length; i++) verdicts.push(guard.scan(bytes.subarray(cuts[i], cuts[i + 1])));
  return verdicts;
};

const GET = 'GET /a HTTP/1.1\r\nHost: x\r\n\r\n';
const CHUNKED = 'POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nTrailer: t\r\n\r\n';
const SIZED = 'POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello';

describe('FramingGuard', () => {
  it('follows requests, bodies by length and by chunks, however the stream is cut', () => {
    const stream = `\r\n${GET}${CHUNKED}${SIZED}${GET}`;
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: stream.length - 1 }), { maxLength: 6 }), (cuts) => {
        expect(scanAll(stream, cuts).every((v) => v.ok)).toBe(true);
      }),
    );
  });

  it.each([
    ['identity, chunked', 'Transfer-Encoding: identity, chunked'],
    ['CHUNKED', 'Transfer-Encoding: CHUNKED'],
    ['a tab before the value', 'Transfer-Encoding:\tchunked'],
    ['a trailing space', 'Transfer-Encoding: chunked '],
    ['two spaces', 'Transfer-Encoding:  chunked'],
  ])('refuses Transfer-Encoding with %s, at the offset of that request', (_what, header) => {
    const bad = `POST /p HTTP/1.1\r\nHost: x\r\n${header}\r\n\r\n0\r\n\r\n`;
    const [verdict] = scanAll(`${GET}${bad}`);
    expect(verdict).toMatchObject({ ok: false, offset: GET.length });
  });

  it('refuses two Transfer-Encoding headers and request lines without single spaces', () => {
    expect(scanAll('POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n')[0]).toMatchObject({ ok: false, offset: 0 });
    for (const line of ['GET  /a HTTP/1.1', 'GET /a  HTTP/1.1', 'GET\t/a HTTP/1.1', 'GET /a HTTP/1.1 ', 'GET /a HTTP/2.0']) {
      expect(scanAll(`${line}\r\nHost: x\r\n\r\n`)[0]).toMatchObject({ ok: false, offset: 0 });
    }
    expect(scanAll('POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:chunked\r\n\r\n0\r\n\r\n')[0]).toEqual({ ok: true });
  });

  it('names offset 0 when the refused head began in an earlier chunk', () => {
    const text = `${GET}GET  /b HTTP/1.1\r\nHost: x\r\n\r\n`;
    const verdicts = scanAll(text, [GET.length + 5]);
    expect(verdicts).toEqual([{ ok: true }, expect.objectContaining({ ok: false, offset: 0 })]);
  });

  it('does not read a body as a request: a body that looks like a bad head is data', () => {
    const body = 'GET  /evil HTTP/1.1\r\n\r\n';
    expect(scanAll(`POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}${GET}`)).toEqual([{ ok: true }]);
  });

  // Issue 23: each of these once switched the guard off for the rest of the connection.
  const SMUGGLE = 'GET /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n';
  it.each([
    ['an Upgrade header without Connection: upgrade', 'GET /a HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n'],
    ['a Content-Length of 16 digits', ''],
    ['a chunk size of 13 hex digits', ''],
  ])('keeps checking the connection after %s', (what, first) => {
    if (first !== '') {
      const verdicts = scanAll(`${first}${SMUGGLE}`);
      expect(verdicts).toEqual([expect.objectContaining({ ok: false, offset: first.length })]);
      return;
    }
    const head = what.includes('Content-Length')
      ? 'POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000000\r\n\r\n'
      : 'POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000\r\n';
    // Refused itself: the guard cannot count it, so nothing of it (nor what follows) reaches Node.
    expect(scanAll(`${head}${SMUGGLE}`)).toEqual([expect.objectContaining({ ok: false, offset: 0, code: 'MALFORMED_REQUEST' })]);
  });

  it('accepts padded chunk sizes and 15-digit lengths it can count', () => {
    expect(scanAll(`POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n00000000000003\r\nabc\r\n0\r\n\r\n${GET}`)).toEqual([{ ok: true }]);
    expect(scanAll('POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 000000000000003\r\n\r\nabc')).toEqual([{ ok: true }]);
  });

  it('refuses anything after an upgrade or CONNECT request (its bytes are not HTTP)', () => {
    const upgrade = 'GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n';
    expect(scanAll(upgrade)).toEqual([{ ok: true }]);
    expect(scanAll(`${upgrade}GET /a HTTP/1.1\r\nHost: x\r\n\r\n`)).toEqual([expect.objectContaining({ ok: false, offset: upgrade.length })]);
    const connect = 'CONNECT h:80 HTTP/1.1\r\nHost: h\r\n\r\n';
    expect(scanAll(`${connect}x`, [connect.length])).toEqual([{ ok: true }, expect.objectContaining({ ok: false, offset: 0 })]);
  });

  it('has one header-block limit, answered 431: 16 KiB of head or 100 header lines', () => {
    expect(scanAll(`GET / HTTP/1.1\r\nHost: x\r\nX: ${'a'.repeat(20_000)}`)).toEqual([expect.objectContaining({ ok: false, code: 'HEADERS_TOO_LARGE' })]);
    const many = (n: number) => `GET / HTTP/1.1\r\nHost: x\r\n${Array.from({ length: n - 1 }, (_, k) => `h${k}: v\r\n`).join('')}\r\n`;
    expect(scanAll(many(100))).toEqual([{ ok: true }]);
    expect(scanAll(`${GET}${many(101)}`)).toEqual([expect.objectContaining({ ok: false, offset: GET.length, code: 'HEADERS_TOO_LARGE' })]);
    // 2,000 small headers, 22.9 KB, cut as TCP would: refused, never truncated.
    const big = many(2000);
    expect(scanAll(big, [1460, 2920, 4380]).at(-1)).toMatchObject({ ok: false, code: 'HEADERS_TOO_LARGE' });
  });

  it('refuses a request without Host (HTTP/1.1), with two, and malformed header or chunk lines itself', () => {
    expect(scanAll('GET / HTTP/1.1\r\n\r\n')[0]).toMatchObject({ ok: false, reason: 'no Host header' });
    expect(scanAll('GET / HTTP/1.0\r\n\r\n')[0]).toEqual({ ok: true });
    expect(scanAll('GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n')[0]).toMatchObject({ ok: false });
    for (const line of ['NoColon', ' folded: x', 'X A: 1', 'X-A: a\rb', 'Content-Length: 1, 1', 'Content-Length: 0\r\nContent-Length: 0']) {
      expect(scanAll(`GET / HTTP/1.1\r\nHost: x\r\n${line}\r\n\r\n`)[0], line).toMatchObject({ ok: false, offset: 0 });
    }
    for (const body of ['-1\r\n\r\n', '3\r\nabcd\r\n0\r\n\r\n', '0\r\nbad trailer\r\n\r\n', `3;${'e'.repeat(2000)}\r\n`]) {
      expect(scanAll(`${GET}POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${body}`)[0], body).toMatchObject({ ok: false, offset: GET.length });
    }
  });

  // Issue 26: heads are read byte by byte now. The text reading it replaced is the reference: both
  // must give the same verdict (offset, reason, code) for every stream, however it is cut.
  describe('reads heads as its text reading did', () => {
    const pick = <T>(values: readonly T[]) => fc.constantFrom(...values);
    // Each part of the request line mostly valid, so that one odd part at a time is common.
    const requestLine = fc
      .tuple(
        pick(['GET', 'GET', 'POST', 'CONNECT', 'get', 'G\tT', '', 'GE T', 'G\xe9T', 'G(T']),
        pick([' ', ' ', ' ', '  ', '\t']),
        pick(['/a', '/a', '/', 'h:80', '', '/a b', '/\x7f', '/\xe9', '/\r', '/\x00']),
        pick([' ', ' ', ' ', '  ', '\t']),
        pick(['HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/1.1 ', 'http/1.1', 'HTTP/1.10', 'HTTP/1.', 'XTTP/1.1', 'HTTP/1.2', 'HTTP/11.1', 'HTTP/1.1x']),
      )
      .map((parts) => parts.join(''));
    const name = pick(['Host', 'host', 'HOST', 'Transfer-Encoding', 'transfer-encoding', 'TRANSFER-ENCODING', 'Content-Length', 'content-length', 'Upgrade', 'Connection', 'X-A', 'X A', '', ' folded', 'Hos', 'Hostx', 'Content-Lengt\xe9']);
    const value = pick([
      ' x', '', ' chunked', 'chunked', '  chunked', ' CHUNKED', ' identity, chunked', '\tchunked', ' chunked ', ' chunke', ' chunkedx',
      ' 5', '5', ' 0', ' 000000000000003', ' 1000000000000000', ' 123456789012345', ' 1, 1', ' \xa05\xa0', ' 5\t', ' +5', ' -1', ' 5 5', ' ',
      ' keep-alive, Upgrade', ' UPGRADE', ' upgrade\xa0', ' close', ' a\rb', ' \x00', ' \xe9', ' websocket', ':', ' a:b',
    ]);
    const headerLine = fc.oneof({ weight: 5, arbitrary: fc.tuple(name, value).map(([n, v]) => `${n}:${v}`) }, { weight: 1, arbitrary: fc.string({ maxLength: 12, unit: fc.integer({ min: 0, max: 255 }).map((c) => String.fromCharCode(c)) }) });
    const body = pick(['', 'hello', '3\r\nabc\r\n0\r\n\r\n', '0\r\n\r\n', '0\r\nT: t\r\n\r\n', 'zz\r\n', 'x']);
    const request = fc.tuple(fc.boolean(), requestLine, fc.array(headerLine, { maxLength: 6 }), body).map(([padded, line, headers, rest]) => `${padded ? '\r\n' : ''}${[line, ...headers].join('\r\n')}\r\n\r\n${rest}`);
    const scanWith = (guard: { scan(chunk: Buffer): unknown }, bytes: Buffer, cuts: number[]): unknown[] => {
      const at = [0, ...cuts.filter((n) => n > 0 && n < bytes.length).sort((a, b) => a - b), bytes.length];
      const verdicts: unknown[] = [];
      for (let i = 0; i + 1 < at.length; i++) {
        const verdict = guard.scan(bytes.subarray(at[i], at[i + 1])) as { ok: boolean };
        verdicts.push(verdict);
        // The server stops feeding a refused connection.
        if (!verdict.ok) break;
      }
      return verdicts;
    };

    it('on generated streams of requests, valid and not, cut anywhere', () => {
      fc.assert(
        fc.property(fc.array(request, { minLength: 1, maxLength: 4 }), fc.array(fc.integer({ min: 1, max: 600 }), { maxLength: 4 }), (requests, cuts) => {
          const bytes = Buffer.from(requests.join(''), 'latin1');
          expect(scanWith(new FramingGuard(), bytes, cuts)).toEqual(scanWith(new ReferenceFramingGuard(), bytes, cuts));
        }),
        { numRuns: 3000 },
      );
    });

    it('reads common heads in one pass, agreeing with the exact reading wherever that pass answers', () => {
      // Mostly lines the one pass accepts (any case of the framing names, their usual values), some odd ones.
      const usualLine = fc
        .tuple(pick(['Host', 'host', 'HOST', 'Transfer-Encoding', 'transfer-encoding', 'Content-Length', 'CONTENT-LENGTH', 'Upgrade', 'Connection', 'connection', 'X-A', 'Accept', 'Hostx']), pick([' x', '', ' chunked', 'chunked', ' 5', ' 0', ' 123456789012345', ' keep-alive, Upgrade', ' close', ' a:b', ' \xe9', ' websocket']))
        .map(([n, v]) => `${n}:${v}`);
      const usualRequestLine = pick(['GET /a HTTP/1.1', 'POST /p?q=1 HTTP/1.1', 'GET / HTTP/1.0', 'CONNECT h:80 HTTP/1.1', 'OPTIONS * HTTP/1.1']);
      const head = fc
        .tuple(fc.oneof({ weight: 4, arbitrary: usualRequestLine }, { weight: 1, arbitrary: requestLine }), fc.array(fc.oneof({ weight: 12, arbitrary: usualLine }, { weight: 1, arbitrary: headerLine }), { maxLength: 8 }))
        .map(([line, headers]) => [line, ...headers].join('\r\n'));
      let answered = 0;
      fc.assert(
        fc.property(head, (text) => {
          const bytes = Buffer.from(text, 'latin1');
          const fast = cleanHeadFraming(bytes, 0, bytes.length);
          if (fast === undefined) return;
          answered++;
          expect(fast).toEqual(exactHeadFraming(bytes, 0, bytes.length));
        }),
        { numRuns: 5000 },
      );
      expect(answered).toBeGreaterThan(1000);
      const ordinary = Buffer.from('GET /a?b=1 HTTP/1.1\r\nhost: x\r\nContent-Length: 5\r\nConnection: keep-alive, Upgrade\r\nUpgrade: ws', 'latin1');
      expect(cleanHeadFraming(ordinary, 0, ordinary.length)).toEqual({ version: '1.1', contentLength: 5, chunked: false, hosts: 1, upgradeHeader: true, connectionUpgrade: true });
      // 100 header lines are read in the one pass; the 101st is left to the exact reading (which refuses it).
      const lines = (n: number): Buffer => Buffer.from(['GET / HTTP/1.1', 'Host: x', ...Array<string>(n - 1).fill('X: y')].join('\r\n'), 'latin1');
      expect(cleanHeadFraming(lines(100), 0, lines(100).length)).toMatchObject({ hosts: 1 });
      expect(cleanHeadFraming(lines(101), 0, lines(101).length)).toBeUndefined();
      expect(exactHeadFraming(lines(101), 0, lines(101).length)).toMatchObject({ code: 'HEADERS_TOO_LARGE' });
    });

    it('on the cases above', () => {
      const streams = [`\r\n${GET}${CHUNKED}${SIZED}${GET}`, 'GET / HTTP/1.1\r\n\r\n', 'GET / HTTP/1.0\r\n\r\n', `GET / HTTP/1.1\r\nHost: x\r\nX: ${'a'.repeat(20_000)}`];
      for (const text of streams) {
        const bytes = Buffer.from(text, 'latin1');
        expect(scanWith(new FramingGuard(), bytes, [])).toEqual(scanWith(new ReferenceFramingGuard(), bytes, []));
      }
    });
  });
});
