import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FramingGuard } from '../../src/http/framing-guard.js';

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
    expect(scanAll('POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n')[0]).toMatchObject({ ok: false, offset: 0 });
    for (const line of ['GET  /a HTTP/1.1', 'GET /a  HTTP/1.1', 'GET\t/a HTTP/1.1', 'GET /a HTTP/1.1 ', 'GET /a HTTP/2.0']) {
      expect(scanAll(`${line}\r\nHost: x\r\n\r\n`)[0]).toMatchObject({ ok: false, offset: 0 });
    }
    expect(scanAll('POST /p HTTP/1.1\r\nTransfer-Encoding:chunked\r\n\r\n0\r\n\r\n')[0]).toEqual({ ok: true });
  });

  it('names offset 0 when the refused head began in an earlier chunk', () => {
    const text = `${GET}GET  /b HTTP/1.1\r\nHost: x\r\n\r\n`;
    const verdicts = scanAll(text, [GET.length + 5]);
    expect(verdicts).toEqual([{ ok: true }, expect.objectContaining({ ok: false, offset: 0 })]);
  });

  it('does not read a body as a request: a body that looks like a bad head is data', () => {
    const body = 'GET  /evil HTTP/1.1\r\n\r\n';
    expect(scanAll(`POST /p HTTP/1.1\r\nContent-Length: ${body.length}\r\n\r\n${body}${GET}`)).toEqual([{ ok: true }]);
  });

  it('stops following after an upgrade or a head too large, leaving the rest to Node', () => {
    expect(scanAll(`GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\nGET  /x HTTP/1.1\r\n\r\n`)).toEqual([{ ok: true }]);
    expect(scanAll(`GET / HTTP/1.1\r\nX: ${'a'.repeat(20_000)}`)).toEqual([{ ok: true }]);
  });
});
