import { describe, expect, it } from 'vitest';
import type { Logger } from 'pino';
import { WarnThrottle } from '../../src/observability/warn-throttle.js';

function recorder(): { logger: Logger; lines: [string, Record<string, unknown>][] } {
  const lines: [string, Record<string, unknown>][] = [];
  const logger = {
    warn: (fields: Record<string, unknown>) => lines.push(['warn', fields]),
    debug: (fields: Record<string, unknown>) => lines.push(['debug', fields]),
  } as unknown as Logger;
  return { logger, lines };
}

describe('WarnThrottle', () => {
  it('warns the first `burst` of a kind per interval, debugs the rest, and counts them on the next warning', () => {
    let now = 0;
    const { logger, lines } = recorder();
    const throttle = new WarnThrottle(logger, 1000, 2, () => now);
    for (let i = 0; i < 5; i++) throttle.warn('k', { i }, 'm');
    throttle.warn('other', { i: 9 }, 'm');
    now = 1000;
    throttle.warn('k', { i: 5 }, 'm');
    expect(lines).toEqual([
      ['warn', { i: 0 }],
      ['warn', { i: 1 }],
      ['debug', { i: 2 }],
      ['debug', { i: 3 }],
      ['debug', { i: 4 }],
      ['warn', { i: 9 }],
      ['warn', { i: 5, suppressed: 3 }],
    ]);
  });

  it('warns again at once after reset', () => {
    const { logger, lines } = recorder();
    const throttle = new WarnThrottle(logger, 1000, 1, () => 0);
    throttle.warn('k', {}, 'm');
    throttle.warn('k', {}, 'm');
    throttle.reset('k');
    throttle.warn('k', {}, 'm');
    expect(lines.map(([level]) => level)).toEqual(['warn', 'debug', 'warn']);
  });
});
