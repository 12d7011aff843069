/**
 * The scale simulation's `--gc-spaces` reading: every node's child runs with --trace-gc-verbose, which
 * prints after each GC what each V8 space has committed. This module turns a child's lines into a series
 * and says, per node, how much of its RSS rise over the measured window was the young generation (new
 * space: V8 resizes it to the allocation rate) and how much the rest of the heap, the old space and the
 * JIT code's space apart.
 */
import { fmt, windowRise } from './sim-rss.js';

export interface SpacesSample {
  /** Minutes since the child started (the trace's own clock). */
  min: number;
  /** New space committed, MB (both semi-spaces). */
  newMb: number;
  /** Old space committed, MB. */
  oldMb: number;
  /** Old space in use, MB: after a full GC (`full`), about what the old generation holds live. */
  oldUsedMb: number;
  /** A full (mark-compact) GC, not a scavenge. */
  full: boolean;
  /** Code space committed, MB (JIT code). */
  codeMb: number;
  /** Every space committed, MB. */
  allMb: number;
}

/**
 * Series of one child's trace: `[pid:0x…]  123456 ms: Scavenge …` opens a GC's block; its `New space`,
 * `Old space` and `Code space` lines (`… committed: N KB`) fill it and its `All spaces` line closes it.
 */
export function spacesSeries(lines: readonly string[], pid: number): SpacesSample[] {
  const prefix = `[${pid}:`;
  const out: SpacesSample[] = [];
  let at = Number.NaN;
  let newKb = Number.NaN;
  let oldKb = Number.NaN;
  let oldUsedKb = Number.NaN;
  let codeKb = Number.NaN;
  let full = false;
  for (const line of lines) {
    if (!line.startsWith(prefix)) continue;
    const gc = /\s(\d+) ms: (Scavenge|Mark-Compact|Minor Mark-Compact)/.exec(line);
    if (gc !== null) {
      at = Number(gc[1]) / 60_000;
      full = gc[2] === 'Mark-Compact';
      newKb = Number.NaN;
      oldKb = Number.NaN;
      oldUsedKb = Number.NaN;
      codeKb = Number.NaN;
      continue;
    }
    const committed = /committed:\s+(\d+) KB/.exec(line);
    if (committed === null || !Number.isFinite(at)) continue;
    const kb = Number(committed[1]);
    if (line.includes('] New space,')) newKb = kb;
    else if (line.includes('] Old space,')) {
      oldKb = kb;
      oldUsedKb = Number(/used:\s+(\d+) KB/.exec(line)?.[1] ?? Number.NaN);
    }
    else if (line.includes('] Code space,')) codeKb = kb;
    else if (line.includes('] All spaces,') && Number.isFinite(newKb)) {
      out.push({ min: at, full, newMb: newKb / 1024, oldMb: oldKb / 1024, oldUsedMb: oldUsedKb / 1024, codeMb: codeKb / 1024, allMb: kb / 1024 });
      at = Number.NaN;
    }
  }
  return out;
}

/**
 * Per node, over the window [from, to] of each child's life (minutes): the rise of its new space, of the
 * other spaces together and of the old and code spaces (same statistic as the RSS rise), and how many
 * times its new space changed size; and what its old space held after the window's first and last full GC.
 */
export function printSpaces(label: string, series: SpacesSample[][], windows: { from: number; to: number }[]): void {
  const inWindow = series.map((s, i) => s.filter((x) => x.min >= windows[i]!.from && x.min <= windows[i]!.to));
  const riseOf = (value: (x: SpacesSample) => number): number[] => inWindow.map((s, i) => windowRise(s, windows[i]!.from, windows[i]!.to, value));
  const newRise = riseOf((x) => x.newMb);
  const otherRise = riseOf((x) => x.allMb - x.newMb);
  const oldRise = riseOf((x) => x.oldMb);
  const codeRise = riseOf((x) => x.codeMb);
  const resizes = inWindow.map((s) => s.reduce((n, x, k) => (k > 0 && x.newMb !== s[k - 1]!.newMb ? n + 1 : n), 0));
  const sizes = inWindow.map((s) => `${Math.min(...s.map((x) => x.newMb)).toFixed(0)}–${Math.max(...s.map((x) => x.newMb)).toFixed(0)}`);
  console.log(`${label}V8 new space committed MB, min–max in the window: ${sizes.join('/')}`);
  console.log(`${label}V8 new space resizes in the window: ${resizes.join('/')}`);
  console.log(`${label}V8 new space rise MB (last 3 min − first 3, medians): ${fmt(newRise, 1)}`);
  console.log(`${label}V8 other spaces' committed rise MB (same): ${fmt(otherRise, 1)}`);
  console.log(`${label}  of which old space: ${fmt(oldRise, 1)}`);
  console.log(`${label}  of which code space (JIT code): ${fmt(codeRise, 1)}`);
  // What the old generation holds after each full GC: growth there is data kept, not pages left committed.
  const fulls = inWindow.map((s) => s.filter((x) => x.full));
  const usedEnds = fulls.map((f) => (f.length === 0 ? '–' : `${f[0]!.oldUsedMb.toFixed(1)}→${f.at(-1)!.oldUsedMb.toFixed(1)}`));
  console.log(`${label}V8 old space in use after full GCs, first → last in the window, MB: ${usedEnds.join(' ')}`);
}
