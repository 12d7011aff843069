/**
 * The performance suite (npm run bench): Switchyard scenarios, each against a baseline measured in the
 * same run on the same machine, plus scale checks. Every figure is a ratio to its baseline, with the
 * absolute numbers beside it.
 *
 *   npx tsx bench/run.ts                   full run: 5 alternating rounds of 3 s (+1 s warm-up), 64 connections (~6 min)
 *   npx tsx bench/run.ts --smoke           CI: 1 short run each, small scale counts, no thresholds (~30 s)
 *   npx tsx bench/run.ts --only <text>     only the rows and checks whose name contains <text>
 *   npx tsx bench/run.ts --strict          exit 1 when a target fails (full mode)
 *   npx tsx bench/run.ts --against <commit>  also today's engine against the one built at <commit> (row "regression vs …";
 *                                          add --only regression for that row alone)
 *   npx tsx bench/run.ts --against <commit> --against-local   also the iii-sdk, 1 KiB and middleware rows against it
 *
 * Baselines (bench/baselines/, no Switchyard code): (1) node:http hello world; (2) node:http + one ws
 * worker; (3) (2) in two node:cluster processes; (4) every request relayed to a sibling that owns the
 * worker; (5) two processes, the worker on one. The engine is the built one (dist/), started through
 * test/support/processes.ts. Results: stdout and .bench-results/latest.md (latest-smoke.md in smoke).
 *
 * This file only runs the scenarios (bench/scenarios/, listed in index.ts) and writes the tables;
 * subjects, members, reporting and the load generator are bench/lib/.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { ROOT } from '../test/support/processes.js';
import { median } from './lib/load.js';
import { machineLine, readStolen } from './lib/machine.js';
import type { Member, Sample } from './lib/members.js';
import { CONNECTIONS, DURATION_MS, RSS_LIMIT_MB, RUNS, WARMUP_MS, selected, smoke, strict } from './lib/options.js';
import type { ScaleRow, Verdict } from './lib/report.js';
import { HEADER, int, ms, passText, tableRow, verdict } from './lib/report.js';
import { scenarios } from './scenarios/index.js';

async function main(): Promise<void> {
  const began = performance.now();
  const loadStart = loadavg();
  const stolenStart = readStolen();
  const lines: string[] = [];
  const say = (line = ''): void => {
    lines.push(line);
  };
  const progress = (text: string): void => {
    process.stderr.write(`[bench ${((performance.now() - began) / 1000).toFixed(0).padStart(3)} s] ${text}\n`);
  };

  const samples: Record<string, Sample[]> = {};
  const rowsOut: string[] = [];
  const verdicts: Verdict[] = [];
  const groupLoads: string[] = [];
  const rssAll: number[] = [];
  const allGenerator: number[] = [];

  const checkRows: ScaleRow[] = [];
  const groups = scenarios();
  // Samples are kept by member id across the run: an id used by two groups would mix their samples.
  const seenIds = new Map<string, string>();
  for (const group of groups) {
    if (group.kind !== 'load') continue;
    for (const id of Object.keys(group.members)) {
      const other = seenIds.get(id);
      if (other !== undefined) throw new Error(`member id ${id} is used by groups ${other} and ${group.name}`);
      seenIds.set(id, group.name);
    }
  }
  for (const group of groups) {
    if (group.kind === 'check') {
      if (!selected(group.name)) continue;
      progress(group.name);
      checkRows.push(...(await group.run()));
      continue;
    }
    const rows = group.rows.filter((r) => selected(r.name));
    if (rows.length === 0) continue;
    const needed = new Set(rows.flatMap((r) => [r.scenario, r.baseline]));
    const order = group.order.filter((id) => needed.has(id));
    progress(`${group.name}: starting ${order.length} setups`);
    try {
      await Promise.all(order.map((id) => (group.members[id] as Member).prepare()));
      groupLoads.push(`${group.name}: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
      for (let round = 0; round < RUNS; round++) {
        // Every other round runs backwards, so a steady drift of the machine favours neither side of a pair.
        for (const id of round % 2 === 0 ? order : [...order].reverse()) {
          const member = group.members[id] as Member;
          const sample = await member.run();
          (samples[id] ??= []).push(sample);
          if (member.engine && sample.rssMb !== undefined) rssAll.push(sample.rssMb);
          allGenerator.push(sample.cpu.generatorPct);
          progress(
            `  round ${round + 1}/${RUNS} ${member.label}: ${int(sample.rps)} req/s, p99 ${ms(sample.p99Ms)} ms, errors ${sample.errors}, ` +
              `CPU µs/req ${sample.cpu.serverUs.toFixed(0)} + ${sample.cpu.workerUs.toFixed(0)}, ` +
              `syscalls/req ${sample.cpu.serverSyscalls.toFixed(2)} (generator ${sample.cpu.generatorPct.toFixed(0)} %)`,
          );
        }
      }
    } finally {
      await Promise.all(group.resources.map((r) => r.stop()));
    }
    for (const row of rows) {
      const { cells, verdict: v } = verdict(row, samples, (group.members[row.baseline] as Member).label);
      rowsOut.push(tableRow(cells));
      verdicts.push(v);
    }
  }

  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  say(`## Switchyard benchmark${smoke ? ' (smoke: no thresholds)' : ''}`);
  say();
  say(
    `${new Date().toISOString()} · node ${process.version} · ${cpus().length} CPUs (${cpu}) · ` +
      `load average at start ${loadStart.map((l) => l.toFixed(2)).join(' ')}, at end ${loadavg().map((l) => l.toFixed(2)).join(' ')}`,
  );
  say();
  say(machineLine(stolenStart, readStolen()));
  say();
  say(
    `Closed loop (undici, ${CONNECTIONS} keep-alive connections), ${RUNS} run${RUNS > 1 ? 's' : ''} of ${DURATION_MS / 1000} s after ${WARMUP_MS / 1000} s of warm-up per subject; ` +
      'subjects of a group run in turn (baseline, scenario, …; every other round backwards) so noise hits both. Figures: median (min–max). ' +
      'ratio = scenario ÷ baseline within each round, median over the rounds. PASS: ratio req/s ≥ target, ratio p99 ≤ 1 ÷ target (the tail grows no more ' +
      'than throughput falls), no errors. The load generator, the engine (or baseline) and the workers share the CPUs. ' +
      'CPU µs/req: CPU time of the server processes (engine primary + children, or the baseline\'s) + of the worker processes, per request of the ' +
      'measured window (from /proc); it does not depend on how the CPUs were shared.' +
      (allGenerator.length === 0 ? '' : ` The load generator itself used a median ${median(allGenerator).toFixed(0)} % of one core.`),
  );
  if (rowsOut.length > 0) {
    say();
    say(tableRow(HEADER));
    say(tableRow(HEADER.map((_, i) => (i >= 2 && i <= 17 ? '---:' : '---'))));
    for (const row of rowsOut) say(row);
    say();
    say(`Baselines (bench/baselines/): (1) node:http hello world; (2) node:http → one JSON invokefunction frame over one ws socket → worker process; ` +
      `(3) (2) in two node:cluster processes, a worker each; (4) one process relays every request to a sibling owning the worker ` +
      `(Unix socket, length-prefixed frames multiplexed by id, JSON text, writes batched per tick); (5) two node:cluster processes, the worker on one, the other relays as (4).`);
    say();
    say(`Load average (1, 5, 15 min) when each group started: ${groupLoads.join('; ')}.`);
    if (rssAll.length > 0) {
      const maxRss = Math.max(...rssAll);
      const pass = maxRss <= RSS_LIMIT_MB;
      verdicts.push({ pass, text: '' });
      say();
      say(`Engine RSS per child under load (max over every Switchyard run): ${maxRss.toFixed(0)} MB (target ≤ ${RSS_LIMIT_MB} MB): ${passText(pass)}`);
    }
  }
  if (checkRows.length > 0) {
    say();
    say('### Scale');
    say();
    say('| check | result | target | result |');
    say('|---|---|---|---|');
    for (const r of checkRows) {
      say(`| ${r.check} | ${r.result} | ${r.target} | ${passText(r.pass)} |`);
      verdicts.push({ pass: r.pass, text: '' });
    }
  }
  const judged = verdicts.filter((v) => v.pass !== undefined);
  const failed = judged.filter((v) => v.pass === false).length;
  say();
  say(`${judged.length - failed} of ${judged.length} targets met${smoke ? ' (smoke: not enforced)' : ''}. Took ${((performance.now() - began) / 1000).toFixed(0)} s.`);

  const markdown = lines.join('\n') + '\n';
  console.log(`\n${markdown}`);
  const dir = join(ROOT, '.bench-results');
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, smoke ? 'latest-smoke.md' : 'latest.md'), markdown);
  process.exit(strict && !smoke && failed > 0 ? 1 : 0);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
