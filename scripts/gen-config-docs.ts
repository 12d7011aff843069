/**
 * Regenerates the configuration reference in README.md from the config schemas:
 *   npx tsx scripts/gen-config-docs.ts
 * Only the lines strictly between the two markers are replaced. Without a README or markers the
 * reference is printed instead, so it can be pasted by hand the first time.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderConfigReference } from '../src/config/describe.js';

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

await main();
