import { describe, expect, it } from 'vitest';
import { sentResponse } from '../../src/http/replies.js';

describe('sentResponse (the response onResponse middleware see)', () => {
  it('joins repeated headers, and keeps names that are Object.prototype members as headers', () => {
    const seen = sentResponse({
      status: 201,
      headers: [
        ['constructor', 'a'],
        ['__proto__', 'b'],
        ['set-cookie', 'x=1'],
        ['set-cookie', 'y=2'],
        ['content-type', 'application/json'],
      ],
      body: '{"ok":true}',
    });
    expect(JSON.stringify(seen.headers)).toBe('{"constructor":"a","__proto__":"b","set-cookie":"x=1, y=2","content-type":"application/json"}');
    expect(seen.status_code).toBe(201);
    expect(seen.body).toEqual({ ok: true });
  });
});
