#!/usr/bin/env node
// What grew between two V8 heap snapshots of one process (`node bench/heap-diff.mjs A.heapsnapshot
// B.heapsnapshot [top]`): live objects grouped by kind and constructor (strings by their first 48
// characters), the groups whose self size grew most, with counts. Both snapshots are taken after a
// full GC, so what is listed is held, not garbage.
import { readFileSync } from 'node:fs';

function groups(file) {
  const snap = JSON.parse(readFileSync(file, 'utf8'));
  const meta = snap.snapshot.meta;
  const fields = meta.node_fields;
  const width = fields.length;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const types = meta.node_types[typeAt];
  const { nodes, strings } = snap;
  const byGroup = new Map();
  const byString = new Map();
  for (let i = 0; i < nodes.length; i += width) {
    const type = types[nodes[i + typeAt]];
    const name = strings[nodes[i + nameAt]];
    const size = nodes[i + sizeAt];
    const key = type === 'string' || type === 'concatenated string' || type === 'sliced string' ? `${type}` : `${type}:${name}`;
    const g = byGroup.get(key) ?? { count: 0, size: 0 };
    g.count++;
    g.size += size;
    byGroup.set(key, g);
    if (type === 'string') {
      const prefix = name.slice(0, 48).replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, '<uuid>').replace(/\d+/g, '<n>');
      const s = byString.get(prefix) ?? { count: 0, size: 0 };
      s.count++;
      s.size += size;
      byString.set(prefix, s);
    }
  }
  return { byGroup, byString, total: [...byGroup.values()].reduce((a, g) => a + g.size, 0) };
}

function diff(a, b, top, title) {
  const rows = [];
  for (const [key, g] of b) {
    const o = a.get(key) ?? { count: 0, size: 0 };
    rows.push({ key, dCount: g.count - o.count, dSize: g.size - o.size, count: g.count });
  }
  for (const [key, o] of a) if (!b.has(key)) rows.push({ key, dCount: -o.count, dSize: -o.size, count: 0 });
  rows.sort((x, y) => y.dSize - x.dSize);
  console.log(`\n${title} (self size grown, bytes; count grown; count now)`);
  for (const r of rows.slice(0, top)) console.log(`${String(r.dSize).padStart(10)} ${String(r.dCount).padStart(8)} ${String(r.count).padStart(8)}  ${JSON.stringify(r.key).slice(0, 110)}`);
}

const [fileA, fileB, topText] = process.argv.slice(2);
if (fileA === undefined || fileB === undefined) {
  console.error('usage: node bench/heap-diff.mjs A.heapsnapshot B.heapsnapshot [top]');
  process.exit(2);
}
const top = Number(topText ?? 30);
const a = groups(fileA);
const b = groups(fileB);
console.log(`self size: ${(a.total / 1e6).toFixed(2)} MB → ${(b.total / 1e6).toFixed(2)} MB (${((b.total - a.total) / 1e3).toFixed(0)} KB)`);
diff(a.byGroup, b.byGroup, top, 'by kind and constructor');
diff(a.byString, b.byString, top, 'strings, by their first 48 characters');
