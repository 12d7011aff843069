// Baseline (2), the physical limit of the design: one node:http process sends each request as one
// JSON invokefunction frame over one ws socket to a separate worker process and answers with its
// reply. Env: WORKER=raw|sdk (default raw). Prints "port=<n>" once the worker answers.
import { listenHttp, startWorker } from './common.mjs';

console.log(`port=${await listenHttp(await startWorker())}`);
