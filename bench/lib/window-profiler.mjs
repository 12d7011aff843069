// Preloaded into an engine (`node --import`, children inherit it) by `bench/profile.ts --window`:
// profiles only the measured window of a load, in the engine's cluster children. The first SIGUSR2
// a child gets starts the profilers, the second stops them and writes
// WINDOW_PROFILE_DIR/window-<pid>.cpuprofile and/or .heapprofile.
//
// WINDOW_PROFILE_MAIN=1   profile the process itself rather than its cluster children (a baseline:
//                         `bench/profile.ts --baseline`); its worker, spawned without the preload, is not
// WINDOW_PROFILE          "cpu", "heap" or "cpu,heap" (one at a time measures each more truly), or
//                         "snapshot": a heap snapshot at the window's end (requests in flight included)

// WINDOW_PROFILE_INTERVAL_US  CPU sampling interval (default 200)
// WINDOW_HEAP_INTERVAL_BYTES  heap sampling interval (default 4096)
//
// The heap profile counts objects the GC has already collected as well (V8's
// includeObjectsCollectedBy*GC), so its sizes are what the window allocated, not what it left live.
import cluster from 'node:cluster';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

const dir = process.env.WINDOW_PROFILE_DIR;
if (dir !== undefined && (cluster.isWorker || process.env.WINDOW_PROFILE_MAIN === '1')) {
  const what = new Set((process.env.WINDOW_PROFILE ?? 'cpu').split(','));
  const session = new Session();
  session.connect();
  // In-thread inspector sessions answer synchronously.
  const post = (method, params) => {
    let answer;
    session.post(method, params, (err, result) => {
      if (err) throw err;
      answer = result;
    });
    return answer;
  };
  let running = false;
  process.on('SIGUSR2', () => {
    if (!running) {
      running = true;
      if (what.has('cpu')) {
        post('Profiler.enable');
        post('Profiler.setSamplingInterval', { interval: Number(process.env.WINDOW_PROFILE_INTERVAL_US ?? 200) });
        post('Profiler.start');
      }
      if (what.has('heap')) {
        post('HeapProfiler.enable');
        post('HeapProfiler.startSampling', {
          samplingInterval: Number(process.env.WINDOW_HEAP_INTERVAL_BYTES ?? 4096),
          includeObjectsCollectedByMajorGC: true,
          includeObjectsCollectedByMinorGC: true,
        });
      }
      return;
    }
    running = false;
    const base = join(dir, `window-${process.pid}`);
    if (what.has('cpu')) writeFileSync(`${base}.cpuprofile`, JSON.stringify(post('Profiler.stop').profile));
    if (what.has('snapshot')) {
      // The live heap at the window's end, requests in flight included (a full GC runs first).
      const chunks = [];
      const onChunk = (m) => chunks.push(m.params.chunk);
      session.on('HeapProfiler.addHeapSnapshotChunk', onChunk);
      post('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
      session.removeListener('HeapProfiler.addHeapSnapshotChunk', onChunk);
      writeFileSync(`${base}.heapsnapshot`, chunks.join(''));
    }
    if (what.has('heap')) writeFileSync(`${base}.heapprofile`, JSON.stringify(post('HeapProfiler.stopSampling').profile));
    writeFileSync(`${base}.done`, '');
  });
}
