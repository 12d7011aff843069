/**
 * Regenerates the configuration reference in README.md from the config schemas, and the module pages'
 * own sections (MODULE_PAGES: docs/stream.md between `<!-- stream-config:start/end -->`, …):
 *   npx tsx scripts/gen-config-docs.ts
 * Only the lines strictly between the two markers are replaced. Without a README or markers the
 * reference is printed instead, so it can be pasted by hand the first time.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MODULE_PAGES, renderConfigReference } from '../src/config/describe.js';

const START_MARKER = '<!-- config-reference:start -->';
const END_MARKER = '<!-- config-reference:end -->';

/** The README with the reference between the markers replaced, or undefined when the markers are missing. */
function replaceReference(readme: string, reference: string): string | undefined {
  const lines = readme.split('\n');
  const start = lines.findIndex((line) => line.trim() === START_MARKER);
  const end = lines.findIndex((line, index) => index > start && line.trim() === END_MARKER);
  if (start === -1 || end === -1) return undefined;
  return [...lines.slice(0, start + 1), reference.trimEnd(), ...lines.slice(end)].join('\n');
}

async function main(): Promise<void> {
  const readmePath = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'README.md');
  const reference = renderConfigReference();
  let readme: string;
  try {
    readme = await readFile(readmePath, 'utf8');
  } catch {
    process.stdout.write(reference);
    return;
  }
  const updated = replaceReference(readme, reference);
  if (updated === undefined) {
    process.stderr.write(`${readmePath} has no ${START_MARKER} / ${END_MARKER} markers; printing the reference instead\n`);
    process.stdout.write(reference);
    return;
  }
  if (updated === readme) {
    process.stderr.write(`${readmePath}: configuration reference already up to date\n`);
    return;
  }
  await writeFile(readmePath, updated);
  process.stderr.write(`${readmePath}: configuration reference updated\n`);
}

/** A module page's own reference (its markers must be there: the page is ours). */
async function modulePage(page: string, module: string, marker: string): Promise<void> {
  const path = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'docs', page);
  const text = await readFile(path, 'utf8');
  const start = `<!-- ${marker}:start -->`;
  const end = `<!-- ${marker}:end -->`;
  const lines = text.split('\n');
  const from = lines.findIndex((line) => line.trim() === start);
  const to = lines.findIndex((line, index) => index > from && line.trim() === end);
  if (from === -1 || to === -1) throw new Error(`${path} has no ${start} / ${end} markers`);
  const updated = [...lines.slice(0, from + 1), renderConfigReference([module]).trimEnd(), ...lines.slice(to)].join('\n');
  if (updated !== text) await writeFile(path, updated);
  process.stderr.write(`${path}: ${updated === text ? 'already up to date' : 'configuration reference updated'}\n`);
}

await main();
for (const { page, module, marker } of MODULE_PAGES) await modulePage(page, module, marker);
