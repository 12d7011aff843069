import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MODULE_PAGES, renderConfigReference } from '../../src/config/describe.js';

describe('module pages\' configuration reference', () => {
  it.each(MODULE_PAGES)('docs/$page is the one generated from the $module schema (run `npm run docs:config` after changing it)', ({ page, module, marker }) => {
    const text = readFileSync(new URL(`../../docs/${page}`, import.meta.url), 'utf8');
    const start = text.indexOf(`<!-- ${marker}:start -->`);
    const end = text.indexOf(`<!-- ${marker}:end -->`);
    expect(start).toBeGreaterThan(0);
    expect(end).toBeGreaterThan(start);
    expect(text.slice(start + `<!-- ${marker}:start -->`.length, end).trim()).toBe(renderConfigReference([module]).trim());
  });

  it('lists every key of a module\'s adapter, per adapter (the `{ name, config }` union)', () => {
    const state = renderConfigReference(['iii-state']);
    expect(state).toContain('| `adapter.name` | kv \\| redis | (required) |');
    expect(state).toMatch(/\| `adapter\.config\.store_method` \| in_memory \\\| file_based \| \(unset\) \| With `kv`: /);
    expect(state).toMatch(/\| `adapter\.config\.redis_url` \| string \| \(unset\) \| With `redis`: /);
    expect(renderConfigReference(['iii-cron'])).toMatch(/\| `adapter\.config\.lock_ttl_ms` \| integer ≥ 1 \| \(unset\) \| With `kv`: /);
  });
});
