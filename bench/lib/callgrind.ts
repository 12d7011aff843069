/**
 * Reading callgrind's output (valgrind --tool=callgrind): the instruction total of a dump, and the
 * instructions each function ran itself, with V8's generated code named from its `--perf-basic-prof`
 * map (bench/instructions.ts). Pure: text in, numbers out.
 */

/** The `totals:` line of a callgrind dump: every instruction counted while instrumentation was on. */
export function totalInstructions(dump: string): number {
  const match = /^totals: (\d+)/m.exec(dump) ?? /^summary: (\d+)/m.exec(dump);
  if (match === null) throw new Error('no totals line in the callgrind dump');
  return Number(match[1]);
}

/**
 * Instructions per function name, self cost only (a call's cost, the line after `calls=`, belongs to
 * the callee). Names are as callgrind wrote them: symbols for the node binary and libraries, a hex
 * address (`0x…`) for code it has no symbol for — V8's generated code.
 */
export function selfInstructions(dump: string): Map<string, number> {
  const names = new Map<string, string>();
  /** `(id) name` defines a compressed name, `(id)` reuses it (callgrind's --compress-strings). */
  const nameOf = (spec: string): string => {
    const match = /^\((\d+)\)(?: (.*))?$/.exec(spec.trim());
    if (match === null) return spec.trim();
    if (match[2] !== undefined) names.set(match[1] as string, match[2]);
    return names.get(match[1] as string) ?? spec.trim();
  };
  const self = new Map<string, number>();
  let current: string | undefined;
  let callCostNext = false;
  for (const line of dump.split('\n')) {
    if (line.startsWith('fn=')) current = nameOf(line.slice(3));
    else if (line.startsWith('cfn=')) nameOf(line.slice(4));
    else if (line.startsWith('calls=')) callCostNext = true;
    else if (/^[0-9+\-*]/.test(line)) {
      const cost = Number(line.trim().split(/\s+/)[1] ?? Number.NaN);
      if (callCostNext) callCostNext = false;
      else if (current !== undefined && Number.isFinite(cost)) self.set(current, (self.get(current) ?? 0) + cost);
    }
  }
  return self;
}

interface CodeRange {
  start: number;
  end: number;
  name: string;
  /** Line in the map: a later entry for the same address is newer code. */
  order: number;
}

/**
 * Names the addresses in `self` from a perf map (`/tmp/perf-<pid>.map`: `start size name`, hex, one
 * code object per line, appended as V8 makes code). Code can be freed and its addresses reused, so an
 * address takes the name of the newest range that covers it. Costs of the same name are added up;
 * an address no range covers keeps its `0x…` name.
 */
export function nameGeneratedCode(self: Map<string, number>, perfMap: string): Map<string, number> {
  const ranges: CodeRange[] = [];
  perfMap.split('\n').forEach((line, order) => {
    const match = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/i.exec(line);
    if (match === null) return;
    const start = Number.parseInt(match[1] as string, 16);
    ranges.push({ start, end: start + Number.parseInt(match[2] as string, 16), name: match[3] as string, order });
  });
  ranges.sort((a, b) => a.start - b.start);
  const longest = ranges.reduce((max, r) => Math.max(max, r.end - r.start), 0);
  const named = new Map<string, number>();
  for (const [name, cost] of self) {
    const address = /^0x([0-9a-f]+)$/i.exec(name);
    let as = name;
    if (address !== null) {
      const at = Number.parseInt(address[1] as string, 16);
      // The last range starting at or before the address, then back over those that could still reach it.
      let lo = 0;
      let hi = ranges.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if ((ranges[mid] as CodeRange).start <= at) lo = mid + 1;
        else hi = mid;
      }
      let best: CodeRange | undefined;
      for (let i = lo - 1; i >= 0 && (ranges[i] as CodeRange).start >= at - longest; i--) {
        const range = ranges[i] as CodeRange;
        if (at < range.end && (best === undefined || range.order > best.order)) best = range;
      }
      if (best !== undefined) as = best.name;
    }
    named.set(as, (named.get(as) ?? 0) + cost);
  }
  return named;
}
