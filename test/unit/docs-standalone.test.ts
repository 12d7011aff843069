import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/** docs/ stands alone: no page sends a reader to specification or design files outside this repository. */
describe('docs/ stands alone', () => {
  it('cites no spec or design file that is not in the repository', () => {
    const pages = readdirSync('docs').filter((name) => name.endsWith('.md')).map((name) => join('docs', name));
    const offenders: string[] = [];
    for (const page of [...pages, 'README.md']) {
      readFileSync(page, 'utf8')
        .split('\n')
        .forEach((line, index) => {
          if (/(?:\.\.\/)?shared\/(?:spec|design)\/|\/work\/shared/.test(line)) offenders.push(`${page}:${index + 1}: ${line.trim()}`);
        });
    }
    expect(offenders).toEqual([]);
  });
});
