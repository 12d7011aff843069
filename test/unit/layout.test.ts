import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative, sep } from 'node:path';
import { describe, expect, it } from 'vitest';

/** The import graph of src/, type-only imports included (docs/design.md#layout). */
function importGraph(): Map<string, string[]> {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (path.endsWith('.ts')) files.push(path);
    }
  };
  walk('src');
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const targets = [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map((m) =>
      normalize(join(dirname(file), (m[1] as string).replace(/\.js$/, '.ts'))),
    );
    graph.set(file, targets);
  }
  return graph;
}

const folderOf = (file: string): string => relative('src', file).split(sep)[0] as string;

describe('source layout', () => {
  const graph = importGraph();

  it('has no two folders that import each other', () => {
    const edges = new Set<string>();
    for (const [file, targets] of graph) {
      for (const target of targets) if (folderOf(file) !== folderOf(target)) edges.add(`${folderOf(file)} -> ${folderOf(target)}`);
    }
    const both = [...edges].filter((edge) => {
      const [from, to] = edge.split(' -> ');
      return edges.has(`${to} -> ${from}`);
    });
    expect(both).toEqual([]);
  });

  it('has no import cycles, type-only imports included', () => {
    const cycles: string[] = [];
    const done = new Set<string>();
    const stack: string[] = [];
    const visit = (file: string): void => {
      if (stack.includes(file)) {
        cycles.push([...stack.slice(stack.indexOf(file)), file].join(' > '));
        return;
      }
      if (done.has(file)) return;
      stack.push(file);
      for (const target of graph.get(file) ?? []) visit(target);
      stack.pop();
      done.add(file);
    };
    for (const file of graph.keys()) visit(file);
    expect(cycles).toEqual([]);
  });

  it('touches process, env and signals only in src/cli/', () => {
    const offenders: string[] = [];
    for (const file of graph.keys()) {
      if (file.startsWith(join('src', 'cli'))) continue;
      const code = readFileSync(file, 'utf8')
        .split('\n')
        .filter((line) => !/^\s*(\/\/|\*|\/\*)/.test(line))
        .join('\n');
      if (/(?<![\w.])process\.(env|on|once|exit|send|connected|argv|execArgv|stdout|stderr|pid)\b/.test(code)) offenders.push(file);
    }
    expect(offenders).toEqual([]);
  });
});
