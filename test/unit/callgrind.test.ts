import { describe, expect, it } from 'vitest';
import { nameGeneratedCode, selfInstructions, totalInstructions } from '../../bench/lib/callgrind.js';

// A dump in callgrind's format with compressed names: `fn=(id) name` defines, `fn=(id)` reuses; the
// cost line after `calls=` is the call's inclusive cost, which belongs to the callee.
const DUMP = `# callgrind format
version: 1
events: Ir
summary: 0

ob=(1) /usr/bin/node
fl=(1) ???
fn=(1) 0x0000000000001010
0 100
cfn=(2) Builtins_JsonStringify
calls=1 0
0 5000
+2 50
fn=(2)
0 4000
fn=(3) 0x0000000000002040
* 30
fn=(1)
-1 7

totals: 9187
`;

describe('callgrind dumps', () => {
  it('reads the total and each function\'s own instructions, leaving calls\' costs to the callee', () => {
    expect(totalInstructions(DUMP)).toBe(9187);
    expect(Object.fromEntries(selfInstructions(DUMP))).toEqual({ '0x0000000000001010': 157, Builtins_JsonStringify: 4000, '0x0000000000002040': 30 });
  });

  it('refuses a dump without totals', () => {
    expect(() => totalInstructions('events: Ir\n')).toThrow(/no totals/);
  });

  it('names generated code from the perf map, the newest code at a reused address winning', () => {
    // Old code at 0x1008 was freed and newer, larger code placed from 0x1000 over it.
    const map = ['1008 40 JS:~old file.js:1:1', '2000 80 JS:*other file.js:9:9', '1000 100 JS:*handler file.js:1:1', ''].join('\n');
    const named = nameGeneratedCode(selfInstructions(DUMP), map);
    // 0x1010 lies in both ranges; the later line (newer code) names it, not the nearer start. 0x2040 lies in 0x2000–0x2080.
    expect(Object.fromEntries(named)).toEqual({ 'JS:*handler file.js:1:1': 157, Builtins_JsonStringify: 4000, 'JS:*other file.js:9:9': 30 });
    expect(Object.fromEntries(nameGeneratedCode(new Map([['0x3000', 5]]), map))).toEqual({ '0x3000': 5 });
  });
});
