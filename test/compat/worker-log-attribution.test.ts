// Workers' log lines carry the worker's id without the worker's metrics (issue 22, point 10): an
// iii-sdk 0.22.1 worker with metrics off, on a two-process engine. Its log records come on a telemetry
// socket that names no worker; a record written in a handler carries the trace the engine sent that
// handler, which names the worker, and then the socket does.
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { http, waitForEveryProcess } from '../support/http.js';
import type { EngineHandle, ManagedProcess } from '../support/processes.js';
import { ROOT, WORKER_READY_MS, spawnManaged, startEngine, stopProcess } from '../support/processes.js';

const APP = join(ROOT, 'test', 'fixtures', 'iii-example-app', 'log-attribution.mjs');

type Line = Record<string, unknown>;

async function metric(engine: EngineHandle, name: string, labels: string): Promise<number> {
  const text = await (await request(`${engine.adminUrl}/metrics`)).body.text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(name) && line.includes(labels))
    .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}

describe("a worker's log lines name it without its metrics, on a two-process engine", () => {
  let engine: EngineHandle;
  let app: ManagedProcess | undefined;

  beforeAll(async () => {
    engine = await startEngine({ cluster: { processes: 2 }, logLevel: 'info' });
  });
  afterAll(async () => {
    if (app !== undefined) await stopProcess(app);
    await engine?.stop();
  });

  /** The engine's JSON lines printed since line `since`. */
  const linesSince = (since: number): Line[] => {
    const out: Line[] = [];
    for (const text of engine.stdout.lines.slice(since)) {
      try {
        out.push(JSON.parse(text) as Line);
      } catch {
        // not a JSON line
      }
    }
    return out;
  };

  it('a Logger line in a handler carries the worker id, and so does a later line outside any handler', async () => {
    // The case worth testing: the telemetry socket on the other child than the worker socket, so the
    // child printing the lines never sent the worker anything and learns it from its sibling through
    // the primary. node:cluster hands connections out in turn, so the app's two sockets usually part;
    // when they do not, the app is started again.
    let since = 0;
    let workerId: string | undefined;
    let connected: Line | undefined;
    const seen = new Set<string>();
    for (let attempt = 0; attempt < 5; attempt++) {
      if (app !== undefined) await stopProcess(app);
      since = engine.stdout.lines.length;
      app = spawnManaged(process.execPath, [APP], { ...process.env, III_URL: engine.workerUrl, OTEL_ENABLED: 'true' });
      await waitForEveryProcess(`${engine.httpUrl}/logs/hello`, 2, (s) => s === 200, WORKER_READY_MS);
      const workers = (await http(`${engine.adminUrl}/workers`)).json<{ id: string; name?: string }[]>();
      workerId = workers.find((w) => w.name === 'log-attribution' && !seen.has(w.id))?.id;
      expect(workerId).toBeDefined();
      seen.add(workerId as string);
      // Before any traced record (the probes' handler calls log nothing), nothing names the socket:
      // its lines print all the same, without an id.
      const from = since;
      const tick = JSON.parse(await engine.stdout.waitFor((l) => l.includes('"msg":"tick"') && engine.stdout.lines.indexOf(l) >= from, 15_000, 'a tick before any logged request')) as Line;
      expect(tick).not.toHaveProperty('workerId');
      connected = linesSince(since).find((l) => l.msg === 'worker connected' && l.workerId === workerId);
      if (connected !== undefined && connected.pid !== tick.pid) break;
    }
    const workerLog = (): Line[] => linesSince(since).filter((l) => l.module === 'worker-log');
    expect(workerLog().filter((l) => l.msg === 'inside the handler')).toEqual([]);

    // Requests on both processes (connection: close); the worker socket is on one child, and the
    // telemetry socket on whichever child took it (the other one, when node:cluster alternates).
    for (let n = 0; n < 4; n++) {
      const res = await http(`${engine.httpUrl}/logs/hello?n=${n}`, { headers: { connection: 'close' } });
      expect(res.status).toBe(200);
    }
    await vi.waitFor(() => expect(workerLog().filter((l) => l.msg === 'inside the handler').length).toBe(4), { timeout: 15_000, interval: 100 });
    const lines = workerLog();
    const inside = lines.filter((l) => l.msg === 'inside the handler');
    expect(inside).toHaveLength(4);
    for (const line of inside) {
      expect(line).toMatchObject({ level: 30, workerId, function: 'logs::hello', service: 'log-attribution' });
      expect(line.trace_id).toMatch(/^[0-9a-f]{32}$/);
    }

    // A tick logged after the first traced record: no trace, the socket's worker.
    const lastTick = Number(((lines.filter((l) => l.msg === 'tick').at(-1)?.data ?? {}) as { tick?: number }).tick ?? 0);
    await vi.waitFor(() => expect(workerLog().some((l) => l.msg === 'tick' && ((l.data ?? {}) as { tick?: number }).tick === lastTick + 2)).toBe(true), { timeout: 15_000, interval: 100 });
    const later = workerLog().filter((l) => l.msg === 'tick' && ((l.data ?? {}) as { tick?: number }).tick === lastTick + 2);
    expect(later).toHaveLength(1);
    expect(later[0]).toMatchObject({ level: 30, workerId, function: 'ticker' });
    expect(later[0]).not.toHaveProperty('trace_id');

    // Not the metrics: the worker sends none.
    expect(await metric(engine, 'switchyard_telemetry_frames_total', 'kind="metrics"')).toBe(0);
    expect(await metric(engine, 'switchyard_telemetry_frames_total', 'kind="logs"')).toBeGreaterThan(0);

    // The child that printed them is not the one holding the worker socket.
    expect(connected?.pid).toBeDefined();
    expect(inside.every((l) => l.pid !== connected?.pid)).toBe(true);
  });
});
