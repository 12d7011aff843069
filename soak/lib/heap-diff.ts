/**
 * What grew between two V8 heap snapshots (the `.heapsnapshot` JSON DevTools reads): live objects
 * counted and sized by constructor (objects), function name (closures) or node type (strings,
 * arrays, code…), and examples of strings present only in the later snapshot — in practice the
 * quickest pointer to what is being kept (ids, paths, label values).
 */
interface RawSnapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

export interface HeapSummary {
  /** key → live count and self size in bytes. */
  groups: Map<string, { count: number; bytes: number }>;
  /** Values of the string nodes. */
  strings: Set<string>;
  totalBytes: number;
}

export function summarize(json: string): HeapSummary {
  const raw = JSON.parse(json) as RawSnapshot;
  const fields = raw.snapshot.meta.node_fields;
  const types = raw.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const groups = new Map<string, { count: number; bytes: number }>();
  const strings = new Set<string>();
  let totalBytes = 0;
  for (let i = 0; i < raw.nodes.length; i += width) {
    const type = types[raw.nodes[i + typeAt] as number] ?? '?';
    const name = raw.strings[raw.nodes[i + nameAt] as number] ?? '';
    const bytes = raw.nodes[i + sizeAt] as number;
    totalBytes += bytes;
    let key: string;
    if (type === 'object') key = name;
    else if (type === 'closure') key = `${name || '(anonymous)'}()`;
    else if (type === 'string' || type === 'concatenated string' || type === 'sliced string') {
      key = '(string)';
      strings.add(name);
    } else key = `(${type}${type === 'array' || type === 'hidden' ? ` ${name}` : ''})`;
    const group = groups.get(key) ?? { count: 0, bytes: 0 };
    group.count++;
    group.bytes += bytes;
    groups.set(key, group);
  }
  return { groups, strings, totalBytes };
}

export interface HeapDiff {
  totalBytesGrowth: number;
  top: { key: string; countGrowth: number; bytesGrowth: number }[];
  newStrings: { count: number; examples: string[] };
}

/** The `limit` groups that grew most in bytes from `before` to `after`, and strings new in `after`. */
export function diff(before: HeapSummary, after: HeapSummary, limit = 15): HeapDiff {
  const keys = new Set([...before.groups.keys(), ...after.groups.keys()]);
  const rows = [...keys].map((key) => {
    const a = before.groups.get(key) ?? { count: 0, bytes: 0 };
    const b = after.groups.get(key) ?? { count: 0, bytes: 0 };
    return { key, countGrowth: b.count - a.count, bytesGrowth: b.bytes - a.bytes };
  });
  rows.sort((x, y) => y.bytesGrowth - x.bytesGrowth);
  const fresh = [...after.strings].filter((s) => !before.strings.has(s));
  // Spread the examples over the list: the first new strings are often one burst of the same thing.
  const step = Math.max(1, Math.floor(fresh.length / 12));
  const examples = fresh.filter((_, i) => i % step === 0).slice(0, 12).map((s) => (s.length > 100 ? `${s.slice(0, 100)}…` : s));
  return { totalBytesGrowth: after.totalBytes - before.totalBytes, top: rows.slice(0, limit), newStrings: { count: fresh.length, examples } };
}
