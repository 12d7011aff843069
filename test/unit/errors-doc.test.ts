import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CLUSTER_ERRORS, ENGINE_FAILURE_CODES, HTTP_ERRORS, INTERNAL_ERRORS, STARTUP_ERRORS, WIRE_ERRORS } from '../../src/errors.js';

const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');

/** Rows of the markdown table under `heading`, as [code, second column]. */
function tableRows(heading: string): [string, string][] {
  const start = doc.indexOf(`## ${heading}`);
  expect(start, `section ${heading}`).toBeGreaterThanOrEqual(0);
  const next = doc.indexOf('\n## ', start + 3);
  const section = doc.slice(start, next === -1 ? undefined : next);
  const rows: [string, string][] = [];
  for (const line of section.split('\n')) {
    const m = /^\| `([A-Za-z_]+)` \| ([^|]+) \|/.exec(line);
    if (m) rows.push([m[1] as string, (m[2] as string).trim()]);
  }
  return rows;
}

describe('docs/errors.md matches src/errors.ts', () => {
  it('lists every HTTP error code with its status, and no others', () => {
    const rows = tableRows('HTTP responses');
    expect(rows.map(([code]) => code).sort()).toEqual(Object.keys(HTTP_ERRORS).sort());
    for (const [code, status] of rows) {
      expect(Number(status), code).toBe(HTTP_ERRORS[code as keyof typeof HTTP_ERRORS].status);
    }
  });

  it('lists every wire error code, and no others', () => {
    expect(tableRows('Worker wire errors').map(([code]) => code).sort()).toEqual(Object.keys(WIRE_ERRORS).sort());
  });

  it('lists every internal code, and no others', () => {
    expect(tableRows('Internal').map(([code]) => code).sort()).toEqual(Object.keys(INTERNAL_ERRORS).sort());
  });

  it('makes every engine failure code an HTTP code (the one list the forward protocol accepts)', () => {
    for (const code of ENGINE_FAILURE_CODES) expect(Object.keys(HTTP_ERRORS)).toContain(code);
  });

  it('lists every cluster code, and no others', () => {
    expect(tableRows('Cluster').map(([code]) => code).sort()).toEqual(Object.keys(CLUSTER_ERRORS).sort());
  });

  it('lists every process error code', () => {
    const codes = tableRows('Process errors').map(([code]) => code);
    for (const code of Object.keys(STARTUP_ERRORS)) expect(codes).toContain(code);
  });
});
