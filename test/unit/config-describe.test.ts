import { describe, expect, it } from 'vitest';
import { describeConfig, renderConfigReference } from '../../src/config/describe.js';

describe('describeConfig', () => {
  const rows = describeConfig();

  it('documents every key with a description', () => {
    const undocumented = rows.filter((row) => row.description.trim() === '').map((row) => `${row.module} ${row.key}`);
    expect(undocumented).toEqual([]);
  });

  it('lists the modules and their keys in documentation order', () => {
    expect([...new Set(rows.map((row) => row.module))]).toEqual([
      '(top level)',
      'iii-http',
      'iii-worker-manager',
      'iii-http-functions',
      'iii-observability',
      'iii-state',
      'iii-stream',
      'iii-pubsub',
      'iii-cron',
      'switchyard-admin',
      'switchyard-cluster',
    ]);
    expect(rows.filter((row) => row.module === 'iii-http').map((row) => row.key)).toEqual([
      'port',
      'host',
      'default_timeout',
      'concurrency_request_limit',
      'concurrency_queue_limit',
      'cors',
      'cors.allowed_origins',
      'cors.allowed_methods',
      'body_limit',
      'stream_body_limit',
      'trust_proxy',
      'request_id_header',
      'ignore_trailing_slash',
      'not_found_function',
      'middleware',
      'middleware[].function_id',
      'middleware[].phase',
      'middleware[].priority',
    ]);
  });

  it('derives types, bounds and defaults from the schemas', () => {
    const row = (module: string, key: string) => rows.find((r) => r.module === module && r.key === key);
    expect(row('iii-http', 'port')).toMatchObject({ type: 'integer 0–65535', default: '3111' });
    expect(row('iii-http', 'host')).toMatchObject({ type: 'string', default: '0.0.0.0' });
    expect(row('iii-http', 'cors')).toMatchObject({ type: 'object', default: '(unset)' });
    expect(row('iii-http', 'cors.allowed_methods')).toMatchObject({ type: 'string[]', default: '[]' });
    expect(row('iii-http', 'middleware')).toMatchObject({ type: 'object[]', default: '[]' });
    expect(row('iii-http', 'middleware[].phase')).toMatchObject({
      type: 'onRequest | preHandler | postHandler | onResponse | onError | onTimeout',
      default: 'preHandler',
    });
    expect(row('iii-http', 'trust_proxy')).toMatchObject({ type: 'boolean', default: 'false' });
    expect(row('iii-worker-manager', 'max_frame_bytes')).toMatchObject({ type: 'integer ≥ 1024', default: '16777216' });
    expect(row('switchyard-cluster', 'processes')).toMatchObject({ type: 'integer 1–256', default: '(unset)' });
    expect(row('(top level)', 'port')).toMatchObject({ type: 'integer 0–65535', default: '49134' });
  });
});

describe('renderConfigReference', () => {
  const markdown = renderConfigReference();

  it('renders one table per module with escaped cells', () => {
    expect(markdown.match(/^\| Key \| Type \| Default \| Description \|$/gm)).toHaveLength(11);
    expect(markdown).toContain('### `iii-http` (class `modules::api::RestApiModule`)');
    expect(markdown).toContain('| `body_limit` | integer ≥ 0 | `1048576` |');
    expect(markdown).toContain('| `middleware[].phase` | onRequest \\| preHandler \\| postHandler \\| onResponse \\| onError \\| onTimeout | `preHandler` |');
  });

  it('is deterministic', () => {
    expect(renderConfigReference()).toBe(markdown);
  });
});
