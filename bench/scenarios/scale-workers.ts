import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { ManagedProcess } from '../../test/support/processes.js';
import { spawnManaged, stopProcess } from '../../test/support/processes.js';
import { rssMb, sampleRss } from '../../test/support/proc.js';
import type { LoadResult } from '../lib/load.js';
import { median, runLoad } from '../lib/load.js';
import { DURATION_MS, RSS_LIMIT_MB, SCALE_WORKERS, WARMUP_MS, WORKERS_DIR, smoke } from '../lib/options.js';
import type { CheckGroup, ScaleRow } from '../lib/report.js';
import { int, ms } from '../lib/report.js';
import { HELLO, loadOptions } from '../lib/requests.js';
import { clientPerPeer, probe, readyz, startSwitchyard, until } from '../lib/subjects.js';

export const scaleWorkers: CheckGroup = { kind: 'check', name: 'scale: connected workers', run: () => scaleWorkersRows() };

/** (c) SCALE_WORKERS connected workers, one route each: all servable, the engine still responsive. */
async function scaleWorkersRows(): Promise<ScaleRow[]> {
  const sy = await startSwitchyard(2, [{ script: 'raw-worker.mjs' }]);
  let many: ManagedProcess | undefined;
  try {
    const pids = sy.children.map((c) => c.pid);
    const short = { durationMs: smoke ? DURATION_MS : 3000, warmupMs: WARMUP_MS };
    const rssBeforeLoad = Math.max(...pids.map(rssMb));
    // Three short runs each side, medians compared: one 3 s run's p99 swung ×1–×2 between identical runs.
    const loadRuns = async (): Promise<{ rps: number; p99Ms: number; errors: number }> => {
      const runs: LoadResult[] = [];
      for (let i = 0; i < (smoke ? 1 : 3); i++) runs.push(await runLoad(loadOptions(sy.engine.httpUrl, HELLO, short)));
      return { rps: median(runs.map((r) => r.rps)), p99Ms: median(runs.map((r) => r.p99Ms)), errors: runs.reduce((n, r) => n + r.errors, 0) };
    };
    const before = await loadRuns();
    const started = performance.now();
    many = spawnManaged(process.execPath, [join(WORKERS_DIR, 'many-workers.mjs')], { ...process.env, III_URL: sy.engine.workerUrl, COUNT: String(SCALE_WORKERS) });
    await many.stdout.waitFor((l) => l.startsWith('registered '), 120_000, 'many workers registered');
    const registeredMs = performance.now() - started;
    const clients = await clientPerPeer(sy.engine, sy.children.map((c) => c.peerId));
    // Every route on every process (the last one first: once it answers, the table holds them all).
    await Promise.all(
      [...clients.values()].map((client) =>
        until('the last worker route', 30_000, async () => ((await probe(client, `/many/${SCALE_WORKERS - 1}`)).status === 200 ? true : undefined), 5),
      ),
    );
    let servableMs = performance.now() - started;
    // Then every route on every process. Routes registered on different children reach each other in
    // no set order, so one that does not answer yet is waited for (to the deadline) and counted late.
    const deadline = started + 30_000;
    let ok = 0;
    let late = 0;
    await Promise.all(
      [...clients.values()].map(async (client) => {
        for (let i = 0; i < SCALE_WORKERS; i++) {
          const answers = async (): Promise<true | undefined> => ((await probe(client, `/many/${i}`)).status === 200 ? true : undefined);
          if (await answers()) ok++;
          else if (await until(`/many/${i}`, Math.max(0, deadline - performance.now()), answers, 5).catch(() => false)) {
            ok++;
            late++;
            servableMs = Math.max(servableMs, performance.now() - started);
          }
        }
      }),
    );
    await Promise.all([...clients.values()].map((c) => c.close()));
    const status = await readyz(sy.engine);
    const rssIdle = Math.max(...pids.map(rssMb));
    const rss = sampleRss(pids, 250);
    const during = await loadRuns();
    const rssLoad = Math.max(0, ...rss.stop().values());
    const p99Ratio = during.p99Ms / before.p99Ms;
    const expected = SCALE_WORKERS * clients.size;
    return [
      {
        check: `(c) ${int(SCALE_WORKERS)} connected raw workers, one route each (processes 2)`,
        result:
          `${ok}/${expected} route probes answer 200 (${clients.size} processes; ${late} only after the last route did); ${status.connectedWorkers} workers connected; ` +
          `all registered in ${int(registeredMs)} ms, servable everywhere in ${int(servableMs)} ms; ` +
          `plain GET before → with them (median of ${smoke ? 1 : 3} runs): ${int(before.rps)} → ${int(during.rps)} req/s, p99 ${ms(before.p99Ms)} → ${ms(during.p99Ms)} ms (×${p99Ratio.toFixed(2)}), errors ${before.errors + during.errors}; ` +
          `max child RSS ${rssBeforeLoad.toFixed(0)} MB before, ${rssIdle.toFixed(0)} MB idle with them, ${rssLoad.toFixed(0)} MB under load`,
        target: `all answer; p99 ×≤ 1.5; RSS ≤ ${RSS_LIMIT_MB} MB`,
        pass: ok === expected && p99Ratio <= 1.5 && rssLoad <= RSS_LIMIT_MB && during.errors === 0,
      },
    ];
  } finally {
    if (many !== undefined) await stopProcess(many, 'SIGTERM', 3000);
    await sy.stop();
  }
}
