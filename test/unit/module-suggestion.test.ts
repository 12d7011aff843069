import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config/load.js';
import { MODULE_NAMES } from '../../src/config/schema.js';
import { editDistance, knownModuleIds, suggestModuleId } from '../../src/config/module-suggestion.js';

function issuesOf(input: unknown): string[] {
  try {
    parseConfig(input);
  } catch (err) {
    if (err instanceof ConfigError) return err.issues.map((issue) => `${issue.path}: ${issue.message}`);
    throw err;
  }
  return [];
}

describe('did you mean: a module name close to a known one is refused', () => {
  it('suggests the nearest known name or class', () => {
    expect(suggestModuleId('iii-htpp')).toBe('iii-http');
    expect(suggestModuleId('III-HTTP')).toBe('iii-http');
    expect(suggestModuleId('iii-worker-manger')).toBe('iii-worker-manager');
    expect(suggestModuleId('switchyard-admn')).toBe('switchyard-admin');
    expect(suggestModuleId('modules::api::RestApiModul')).toBe('modules::api::RestApiModule');
    expect(suggestModuleId('iii-stat')).toBe('iii-state');
    expect(suggestModuleId('my-own-thing')).toBeUndefined();
    expect(suggestModuleId('iii-http')).toBeUndefined();
    expect(editDistance('iii-htpp', 'iii-http')).toBe(1);
  });

  it('knows every name schema.ts lists (one list: names added there are picked up)', () => {
    for (const name of Object.values(MODULE_NAMES)) expect(knownModuleIds()).toContain(name);
  });

  it('refuses the config with the suggestion, and still skips exact iii names and far-off ones', () => {
    expect(issuesOf({ workers: [{ name: 'iii-htpp', config: { port: 3111 } }] })).toEqual(['workers[0](iii-htpp).name: unknown module "iii-htpp"; did you mean "iii-http"?']);
    expect(issuesOf({ modules: [{ class: 'modules::api::RestApiModul' }] })).toEqual([
      'modules[0](modules::api::RestApiModul).class: unknown module "modules::api::RestApiModul"; did you mean "modules::api::RestApiModule"?',
    ]);
    expect(issuesOf({ workers: [{ name: 'iii-cron' }, { name: 'acme-billing' }] })).toEqual([]);
  });
});
