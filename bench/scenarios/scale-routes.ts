import { performance } from 'node:perf_hooks';
import { RawWorker } from '../../test/support/raw-worker.js';
import { startEngine } from '../../test/support/processes.js';
import { SCALE_ROUTES } from '../lib/options.js';
import type { CheckGroup, ScaleRow } from '../lib/report.js';
import { int } from '../lib/report.js';
import { clientPerPeer, probe, readyz, until } from '../lib/subjects.js';

export const scaleRoutes: CheckGroup = { kind: 'check', name: 'scale: routes registered by one worker', run: () => scaleRoutesRows() };

/** (a) One worker registers SCALE_ROUTES routes; time until the last is servable on every process. */
async function scaleRoutesRows(): Promise<ScaleRow[]> {
  const engine = await startEngine({ cluster: { processes: 2 }, logLevel: 'warn', env: { SWITCHYARD_SERVED_BY_HEADER: '1' } });
  const worker = await RawWorker.connect(engine.workerUrl);
  try {
    const { children } = await readyz(engine);
    const clients = await clientPerPeer(engine, children.map((c) => c.peerId));
    await worker.ofType('workerregistered');
    worker.serve('scale::fn', () => ({ status_code: 200, headers: { 'content-type': 'application/json' }, body: { ok: true } }));
    const pathOf = (k: number): string => (k % 2 === 0 ? `/scale/r${k}` : `/scale/r${k}/items/:id`);
    const probePath = (k: number): string => pathOf(k).replace(':id', '7');
    const last = SCALE_ROUTES - 1;
    const started = performance.now();
    worker.send({ type: 'registerfunction', id: 'scale::fn' });
    for (let k = 0; k < SCALE_ROUTES; k++) {
      worker.send({ type: 'registertrigger', id: `s${k}`, trigger_type: 'http', function_id: 'scale::fn', config: { api_path: pathOf(k), http_method: 'GET' } });
    }
    const sentMs = performance.now() - started;
    const times = await Promise.all(
      [...clients.values()].map((client) =>
        until('the last route', 30_000, async () => ((await probe(client, probePath(last))).status === 200 ? performance.now() - started : undefined), 5),
      ),
    );
    // Spot check: a sample of every route shape answers on every process.
    let ok = 0;
    let tried = 0;
    for (const client of clients.values()) {
      for (let k = 0; k < SCALE_ROUTES; k += Math.max(1, Math.floor(SCALE_ROUTES / 200))) {
        tried++;
        if ((await probe(client, probePath(k))).status === 200) ok++;
      }
    }
    await Promise.all([...clients.values()].map((c) => c.close()));
    const slowest = Math.max(...times);
    return [
      {
        check: `(a) ${int(SCALE_ROUTES)} routes registered by one worker → the last servable on every process (processes 2)`,
        result: `${int(slowest)} ms (per process: ${times.map(int).join(', ')} ms; frames sent in ${int(sentMs)} ms; spot check ${ok}/${tried} routes answer 200)`,
        target: '≤ 2,000 ms',
        pass: slowest <= 2000 && ok === tried,
      },
    ];
  } finally {
    await worker.close();
    await engine.stop();
  }
}
