import { BUILT_IN_NAMES, MODULE_CLASSES, MODULE_NAME_ALIASES, MODULE_NAMES } from './schema.js';

/**
 * iii 0.22.1's other module names (read from iii's source): an exact one is skipped with a warning
 * as before; a near miss of one of them is a typo like any other.
 */
const III_OTHER_NAMES: readonly string[] = [
  'iii-stream',
  'iii-state',
  'iii-queue',
  'iii-pubsub',
  'iii-cron',
  'iii-exec',
  'iii-bridge',
  'iii-console',
  'iii-sandbox',
  'iii-telemetry',
  'iii-worker-ops',
];

/** A name this far (or nearer) from a known one is taken for a typo of it. */
const MAX_EDITS = 2;

/** Every module name and class the config knows: built from schema.ts's lists, so additions there count. */
export function knownModuleIds(): string[] {
  return [
    ...new Set([
      ...Object.values(MODULE_NAMES),
      ...Object.keys(MODULE_NAME_ALIASES),
      ...BUILT_IN_NAMES,
      ...Object.values(MODULE_CLASSES),
      ...III_OTHER_NAMES,
    ]),
  ];
}

/** An iii module name Switchyard does not implement: skipped with a warning, not refused. */
export function isOtherIiiModule(id: string): boolean {
  return III_OTHER_NAMES.includes(id);
}

/**
 * The known module name or class `id` is most likely a misspelling of (case, a swapped pair, a
 * missing or extra letter: at most two edits), or undefined when none is that close.
 */
export function suggestModuleId(id: string): string | undefined {
  let best: { id: string; edits: number } | undefined;
  for (const known of knownModuleIds()) {
    if (known === id) return undefined;
    const edits = known.toLowerCase() === id.toLowerCase() ? 0.5 : editDistance(known, id);
    if (edits <= MAX_EDITS && (best === undefined || edits < best.edits)) best = { id: known, edits };
  }
  return best?.id;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
export function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > MAX_EDITS) return MAX_EDITS + 1;
  const rows: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  const at = (i: number, j: number): number => rows[i]?.[j] ?? Number.POSITIVE_INFINITY;
  for (let i = 1; i <= a.length; i++) {
    const row = rows[i] as number[];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) value = Math.min(value, at(i - 2, j - 2) + 1);
      row[j] = value;
    }
  }
  return at(a.length, b.length);
}
