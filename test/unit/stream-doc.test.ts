import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderConfigReference } from '../../src/config/describe.js';

describe('docs/stream.md configuration reference', () => {
  it('is the one generated from the iii-stream schema (run `npm run docs:config` after changing it)', () => {
    const page = readFileSync(new URL('../../docs/stream.md', import.meta.url), 'utf8');
    const start = page.indexOf('<!-- stream-config:start -->');
    const end = page.indexOf('<!-- stream-config:end -->');
    expect(start).toBeGreaterThan(0);
    expect(end).toBeGreaterThan(start);
    expect(page.slice(start + '<!-- stream-config:start -->'.length, end).trim()).toBe(renderConfigReference(['iii-stream']).trim());
  });
});
