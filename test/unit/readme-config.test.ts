import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderConfigReference } from '../../src/config/describe.js';

describe('README configuration reference', () => {
  it('is the one generated from the schema (run `npm run docs:config` after changing it)', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const start = readme.indexOf('<!-- config-reference:start -->');
    const end = readme.indexOf('<!-- config-reference:end -->');
    expect(start).toBeGreaterThan(0);
    expect(end).toBeGreaterThan(start);
    const section = readme.slice(start + '<!-- config-reference:start -->'.length, end).trim();
    expect(section).toBe(renderConfigReference().trim());
  });
});
