import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectErrorEnvelope } from '../support/assertions.js';
import type { SimpleResponse } from '../support/http.js';
import { http, waitForStatus } from '../support/http.js';
import type { InProcessEngine } from '../support/in-process.js';
import type { WorkerHandle } from '../support/processes.js';
import { startWorker, WORKER_READY_MS } from '../support/processes.js';
import { startInProcessEngine } from '../support/in-process.js';
import { RawWorker } from '../support/raw-worker.js';

// The middleware system (http-module.md §2.5-2.7, §3, §7; docs/middleware.md) over real HTTP, with a
// real engine and real iii-sdk workers (test/fixtures/workers/middleware-worker.mjs: its header
// protocol `x-act-<name>` and its /mw/records, /mw/calls and /mw/release routes are described there).
//
// Engine A (default_timeout 10 s): phases, payloads, order, scope, rewrites, failures, a second worker,
// raw-client registrations. Engine B (default_timeout 1.5 s, RestApiModule `middleware` list): onTimeout
// and the configured middleware.

const B_TIMEOUT_MS = 1500;
/** onError/onTimeout get at least this long even when the deadline is gone (pipeline.ts). */
const ERROR_PHASE_BUDGET_MS = 1000;

interface MwRecord {
  fn: string;
  input: any;
}

let engineA: InProcessEngine;
let engineB: InProcessEngine;
let appWorker: WorkerHandle;
let timeoutWorker: WorkerHandle;
let extWorker: WorkerHandle | undefined;
const rawWorkers: RawWorker[] = [];

/** Serves cfg::raw (an engine-B `middleware` list entry) from a raw ws client, so a test can take it down. */
async function serveCfgRaw(): Promise<RawWorker> {
  const raw = await RawWorker.connect(engineB.workerUrl);
  rawWorkers.push(raw);
  raw.serve('cfg::raw', (data) => ({ action: 'continue', context: { trail: [...(data.context.trail ?? []), 'cfg::raw'] } }));
  raw.send({ type: 'registerfunction', id: 'cfg::raw' });
  await raw.sync();
  return raw;
}

beforeAll(async () => {
  const startA = async () => {
    engineA = await startInProcessEngine({ api: { default_timeout: 10_000 } });
    appWorker = startWorker('middleware-worker', engineA.workerUrl, { ROLE: 'app' });
    await waitForStatus(`${engineA.httpUrl}/app-ready`, (s) => s === 200, {}, WORKER_READY_MS);
  };
  const startB = async () => {
    engineB = await startInProcessEngine({
      api: {
        default_timeout: B_TIMEOUT_MS,
        middleware: [
          { function_id: 'cfg::late', phase: 'preHandler', priority: 10 },
          { function_id: 'cfg::first', phase: 'preHandler' },
          { function_id: 'cfg::second', phase: 'preHandler', priority: 0 },
          { function_id: 'cfg::raw', phase: 'onRequest' },
        ],
      },
      // Shorter than default_timeout: a middleware whose worker left fails once the grace is over.
      workers: { reconnect_grace_ms: 300 },
    });
    await serveCfgRaw();
    timeoutWorker = startWorker('middleware-worker', engineB.workerUrl, { ROLE: 'timeout' });
    await waitForStatus(`${engineB.httpUrl}/timeout-ready`, (s) => s === 200, {}, WORKER_READY_MS);
  };
  await Promise.all([startA(), startB()]);
}, 45_000);

afterAll(async () => {
  await Promise.all(rawWorkers.map((w) => w.close()));
  await Promise.all([extWorker?.stop(), appWorker?.stop(), timeoutWorker?.stop()]);
  await Promise.all([engineA?.stop(), engineB?.stop()]);
});

let ridCounter = 0;
const rid = (label: string): string => `${label}-${++ridCounter}-${process.pid}`;

const get = (engine: InProcessEngine, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<SimpleResponse> =>
  http(`${engine.httpUrl}${path}`, { method, headers });

async function records(engine: InProcessEngine, id: string): Promise<MwRecord[]> {
  const res = await get(engine, `/mw/records/${id}`);
  expect(res.status).toBe(200);
  return res.json().records as MwRecord[];
}

/** Waits (polling, with a deadline) until middleware `fn` has recorded request `id`; returns all its records. */
async function waitForRecord(engine: InProcessEngine, id: string, fn: string): Promise<MwRecord[]> {
  const res = await waitForStatus(`${engine.httpUrl}/mw/records/${id}?want=${encodeURIComponent(fn)}`, (s) => s === 200);
  return res.json().records as MwRecord[];
}

const inputs = (list: MwRecord[], fn: string): any[] => list.filter((r) => r.fn === fn).map((r) => r.input);
const only = (list: MwRecord[], fn: string): any => {
  const found = inputs(list, fn);
  expect(found, `exactly one record of ${fn}`).toHaveLength(1);
  return found[0];
};
const fns = (list: MwRecord[]): string[] => list.map((r) => r.fn);

async function handlerCalls(engine: InProcessEngine, fn: string): Promise<number> {
  const res = await get(engine, '/mw/calls');
  expect(res.status).toBe(200);
  return (res.json().calls[fn] as number | undefined) ?? 0;
}

const PHASE_TRAIL = ['app::req', 'app::req2', 'app::pre'];
const PH_OK_ROUTE = { function_id: 'app::phOk', path_pattern: '/phases/ok/:id' };
const REQUEST_KEYS = ['body', 'context', 'headers', 'ip', 'method', 'path', 'path_params', 'query_params', 'request_id', 'trigger'];

describe('phases and what each receives', () => {
  it('onRequest, preHandler, postHandler and onResponse get their fields; context accumulates and reaches the handler', async () => {
    const id = rid('payload');
    const res = await get(engineA, '/phases/ok/7?q=1', { 'x-request-id': id });
    expect(res.status).toBe(200);
    expect(res.headers['x-handler']).toBe('app::phOk');
    const body = res.json();
    expect(body.fn).toBe('app::phOk');
    expect(body.request.context).toStrictEqual({ trail: PHASE_TRAIL });
    expect(body.request.trigger).toStrictEqual({ type: 'http', path: '/phases/ok/:id', method: 'GET' });
    expect(body.request.path_params).toStrictEqual({ id: '7' });

    const list = await waitForRecord(engineA, id, 'app::resp');
    expect(fns(list)).toEqual(['app::req', 'app::req2', 'app::pre', 'app::post', 'app::post2', 'app::resp']);

    const onRequest = only(list, 'app::req');
    expect(Object.keys(onRequest).sort()).toEqual(['context', 'phase', 'request']);
    expect(onRequest.phase).toBe('onRequest');
    expect(onRequest.context).toStrictEqual({});
    expect(Object.keys(onRequest.request).sort()).toEqual(REQUEST_KEYS);
    expect(onRequest.request).toMatchObject({ path: '/phases/ok/7', method: 'GET', path_params: {}, query_params: { q: '1' }, body: null, request_id: id, context: {} });
    expect(onRequest.request.headers['x-request-id']).toBe(id);

    const onRequest2 = only(list, 'app::req2');
    expect(onRequest2.phase).toBe('onRequest');
    expect(onRequest2.context).toStrictEqual({ trail: ['app::req'] });
    expect(onRequest2.request.context).toStrictEqual({ trail: ['app::req'] });

    const preHandler = only(list, 'app::pre');
    expect(Object.keys(preHandler).sort()).toEqual(['context', 'matched_route', 'phase', 'request']);
    expect(preHandler.phase).toBe('preHandler');
    expect(preHandler.matched_route).toStrictEqual(PH_OK_ROUTE);
    expect(preHandler.context).toStrictEqual({ trail: ['app::req', 'app::req2'] });
    expect(preHandler.request.path_params).toStrictEqual({ id: '7' });
    expect(preHandler.request.trigger).toStrictEqual({ type: 'http', path: '/phases/ok/:id', method: 'GET' });

    const postHandler = only(list, 'app::post');
    expect(Object.keys(postHandler).sort()).toEqual(['context', 'matched_route', 'phase', 'request', 'response']);
    expect(postHandler.phase).toBe('postHandler');
    expect(postHandler.matched_route).toStrictEqual(PH_OK_ROUTE);
    expect(postHandler.response).toStrictEqual({ status_code: 200, body, headers: { 'x-handler': 'app::phOk' } });
    expect(postHandler.context).toStrictEqual({ trail: PHASE_TRAIL });
    expect(only(list, 'app::post2').context).toStrictEqual({ trail: [...PHASE_TRAIL, 'app::post'] });

    const onResponse = only(list, 'app::resp');
    expect(Object.keys(onResponse).sort()).toEqual(['context', 'matched_route', 'phase', 'request', 'response']);
    expect(onResponse.phase).toBe('onResponse');
    expect(onResponse.matched_route).toStrictEqual(PH_OK_ROUTE);
    expect(onResponse.response).toStrictEqual({
      status_code: 200,
      headers: { 'x-handler': 'app::phOk', 'content-type': 'application/json' },
      body,
    });
    expect(onResponse.context).toStrictEqual({ trail: [...PHASE_TRAIL, 'app::post', 'app::post2'] });
  });

  it('onError gets error and matched_route (no response); the default 500 stands when it continues', async () => {
    const id = rid('onerror');
    const res = await get(engineA, '/phases/fail', { 'x-request-id': id });
    const envelope = expectErrorEnvelope(res, 500, 'invocation_failed');
    expect(envelope.error.message).toBe('handler exploded');

    const list = await waitForRecord(engineA, id, 'app::resp');
    // postHandler does not run for a failed handler.
    expect(fns(list)).toEqual(['app::req', 'app::req2', 'app::pre', 'app::err', 'app::resp']);
    const onError = only(list, 'app::err');
    expect(Object.keys(onError).sort()).toEqual(['context', 'error', 'matched_route', 'phase', 'request']);
    expect(onError.phase).toBe('onError');
    expect(onError.error).toStrictEqual({ code: 'invocation_failed', message: 'handler exploded' });
    expect(onError.matched_route).toStrictEqual({ function_id: 'app::phFail', path_pattern: '/phases/fail' });
    expect(onError.context).toStrictEqual({ trail: PHASE_TRAIL });
    expect(only(list, 'app::resp').response.status_code).toBe(500);
  });

  it('onError respond replaces the 500', async () => {
    const res = await get(engineA, '/phases/fail', { 'x-act-err': 'respond:503' });
    expect(res.status).toBe(503);
    expect(res.headers['x-responded-by']).toBe('app::err');
    expect(res.json()).toStrictEqual({ responded_by: 'app::err', phase: 'onError', trail: PHASE_TRAIL });
  });

  it('an onError middleware that fails (throws, bad result) falls back to the default 500, and runs once', async () => {
    for (const act of ['throw', 'raw:{"action":"retry"}', 'raw:null']) {
      const id = rid('onerror-fail');
      const res = await get(engineA, '/phases/fail', { 'x-request-id': id, 'x-act-err': act });
      const envelope = expectErrorEnvelope(res, 500, 'invocation_failed');
      expect(envelope.error.message).toBe('handler exploded');
      const list = await waitForRecord(engineA, id, 'app::resp');
      expect(fns(list)).toEqual(['app::req', 'app::req2', 'app::pre', 'app::err', 'app::resp']);
    }
  });
});

describe('onResponse', () => {
  it('runs after the response is sent: a blocked onResponse middleware does not hold the response', async () => {
    const id = rid('block');
    const res = await get(engineA, '/phases/ok/1', { 'x-request-id': id, 'x-act-resp': 'block' });
    // The middleware cannot finish before /mw/release is called, which happens only after this response.
    expect(res.status).toBe(200);
    expect(res.json().fn).toBe('app::phOk');
    const running = await waitForRecord(engineA, id, 'app::resp');
    expect(fns(running)).not.toContain('app::resp:done');
    expect((await get(engineA, `/mw/release/${id}`)).status).toBe(200);
    const done = await waitForRecord(engineA, id, 'app::resp:done');
    expect(fns(done).slice(-2)).toEqual(['app::resp', 'app::resp:done']);
  });

  it('cannot change the response: respond and failures are ignored', async () => {
    for (const act of ['respond:418', 'throw', 'raw:{"action":"nope"}']) {
      const id = rid('resp-ignored');
      const res = await get(engineA, '/phases/ok/2', { 'x-request-id': id, 'x-act-resp': act });
      expect({ act, status: res.status }).toEqual({ act, status: 200 });
      expect(res.json().fn).toBe('app::phOk');
      expect(res.headers['x-responded-by']).toBeUndefined();
      const list = await waitForRecord(engineA, id, 'app::resp');
      expect(only(list, 'app::resp').response.status_code).toBe(200);
    }
    expect((await get(engineA, '/phases/ok/3')).status).toBe(200);
  });
});

describe('respond', () => {
  it('in onRequest answers without matching or calling the handler, and skips the rest of the phase', async () => {
    const before = await handlerCalls(engineA, 'app::phOk');
    const id = rid('respond-onrequest');
    const res = await get(engineA, '/phases/ok/1', { 'x-request-id': id, 'x-act-req': 'respond:401' });
    expect(res.status).toBe(401);
    expect(res.headers['x-responded-by']).toBe('app::req');
    expect(res.headers['x-request-id']).toBe(id);
    expect(res.json()).toStrictEqual({ responded_by: 'app::req', phase: 'onRequest', trail: [] });
    const list = await waitForRecord(engineA, id, 'app::resp');
    expect(fns(list)).toEqual(['app::req', 'app::resp']);
    // No route was matched, so onResponse has no matched_route.
    expect(Object.keys(only(list, 'app::resp')).sort()).toEqual(['context', 'phase', 'request', 'response']);
    expect(await handlerCalls(engineA, 'app::phOk')).toBe(before);
  });

  it('in preHandler answers without calling the handler', async () => {
    const before = await handlerCalls(engineA, 'app::phOk');
    const id = rid('respond-prehandler');
    const res = await get(engineA, '/phases/ok/1', { 'x-request-id': id, 'x-act-pre': 'respond:403' });
    expect(res.status).toBe(403);
    expect(res.json()).toStrictEqual({ responded_by: 'app::pre', phase: 'preHandler', trail: ['app::req', 'app::req2'] });
    const list = await waitForRecord(engineA, id, 'app::resp');
    expect(fns(list)).toEqual(['app::req', 'app::req2', 'app::pre', 'app::resp']);
    expect(await handlerCalls(engineA, 'app::phOk')).toBe(before);
  });

  it('in postHandler replaces the handler response (the handler ran once; later postHandler middleware skipped)', async () => {
    const before = await handlerCalls(engineA, 'app::phOk');
    const id = rid('respond-posthandler');
    const res = await get(engineA, '/phases/ok/1', { 'x-request-id': id, 'x-act-post': 'respond:202' });
    expect(res.status).toBe(202);
    expect(res.headers['x-handler']).toBeUndefined();
    expect(res.json()).toStrictEqual({ responded_by: 'app::post', phase: 'postHandler', trail: PHASE_TRAIL });
    const list = await waitForRecord(engineA, id, 'app::resp');
    expect(fns(list)).toEqual(['app::req', 'app::req2', 'app::pre', 'app::post', 'app::resp']);
    expect(only(list, 'app::resp').response).toStrictEqual({
      status_code: 202,
      headers: { 'x-responded-by': 'app::post', 'content-type': 'application/json' },
      body: { responded_by: 'app::post', phase: 'postHandler', trail: PHASE_TRAIL },
    });
    expect(await handlerCalls(engineA, 'app::phOk')).toBe(before + 1);
  });
});

describe('failing middleware', () => {
  const requestPhaseFailures: [header: string, act: string, fn: string, phase: string][] = [
    ['x-act-req', 'throw', 'app::req', 'onRequest'],
    ['x-act-req2', 'raw:{"action":"skip"}', 'app::req2', 'onRequest'],
    ['x-act-pre', 'throw', 'app::pre', 'preHandler'],
    ['x-act-pre', 'raw:"continue"', 'app::pre', 'preHandler'],
    ['x-act-pre', 'raw:{"action":"respond"}', 'app::pre', 'preHandler'],
    ['x-act-pre', 'raw:{"action":"continue","context":[1]}', 'app::pre', 'preHandler'],
  ];

  it('answers 500 in onRequest/preHandler (a throw with the worker\'s code, as iii; bad results MIDDLEWARE_FAILED) and never calls the handler', async () => {
    const before = await handlerCalls(engineA, 'app::phOk');
    for (const [header, act, fn, phase] of requestPhaseFailures) {
      const id = rid('fail');
      const res = await get(engineA, '/phases/ok/1', { 'x-request-id': id, [header]: act });
      if (act === 'throw') {
        const envelope = expectErrorEnvelope(res, 500, 'invocation_failed');
        expect(envelope.error.message).toBe(`${fn} exploded`);
      } else {
        const envelope = expectErrorEnvelope(res, 500, 'MIDDLEWARE_FAILED');
        expect(envelope.error.message).toBe(`middleware ${fn} failed in ${phase}`);
      }
      const list = await waitForRecord(engineA, id, 'app::resp');
      // Nothing after the failed middleware ran (onResponse aside).
      expect(fns(list)).toEqual([...PHASE_TRAIL.slice(0, PHASE_TRAIL.indexOf(fn) + 1), 'app::resp']);
    }
    expect(await handlerCalls(engineA, 'app::phOk')).toBe(before);
  });

  it('goes on past a middleware that returns nothing, as iii does', async () => {
    const res = await get(engineA, '/phases/ok/1', { 'x-act-pre': 'raw:null' });
    expect(res.status).toBe(200);
  });

  it('answers 500 when a postHandler middleware fails: the worker\'s code for a throw, MIDDLEWARE_FAILED for a bad result', async () => {
    const thrown = expectErrorEnvelope(await get(engineA, '/phases/ok/1', { 'x-act-post': 'throw' }), 500, 'invocation_failed');
    expect(thrown.error.message).toBe('app::post exploded');
    const bad = expectErrorEnvelope(await get(engineA, '/phases/ok/1', { 'x-act-post': 'raw:{"action":"skip"}' }), 500, 'MIDDLEWARE_FAILED');
    expect(bad.error.message).toBe('middleware app::post failed in postHandler');
  });

  it('fails the request when a patch nests deeper than 32 levels', async () => {
    const before = await handlerCalls(engineA, 'app::phOk');
    const deep = `${'{"d":'.repeat(40)}1${'}'.repeat(40)}`;
    const res = await get(engineA, '/phases/ok/1', { 'x-act-pre': `raw:{"action":"continue","context":${deep}}` });
    expectErrorEnvelope(res, 500, 'MIDDLEWARE_FAILED');
    expect(await handlerCalls(engineA, 'app::phOk')).toBe(before);
  });
});

describe('order', () => {
  it('runs lower priority first; ties keep registration order', async () => {
    const res = await get(engineA, '/order/x');
    expect(res.status).toBe(200);
    expect(res.json().request.context).toStrictEqual({ trail: ['app::oNeg', 'app::o0', 'app::oTieA', 'app::oTieB', 'app::o10'] });
  });

  it('a respond skips the later middleware of the phase', async () => {
    const id = rid('order-respond');
    const res = await get(engineA, '/order/x', { 'x-request-id': id, 'x-act-o0': 'respond:409' });
    expect(res.status).toBe(409);
    expect(res.json()).toStrictEqual({ responded_by: 'app::o0', phase: 'preHandler', trail: ['app::oNeg'] });
    expect(fns(await records(engineA, id))).toEqual(['app::oNeg', 'app::o0']);
  });

  it('orders scoped and global middleware of one phase together', async () => {
    const res = await get(engineA, '/phases/ok/1', { 'x-global': '1' });
    // app::req (scoped) was registered before the globals; app::req2 has priority 1.
    expect(res.json().request.context.trail).toEqual(['app::req', 'app::gNone', 'app::gRoot', 'app::gStar', 'app::req2', 'app::pre']);
  });
});

describe('scope', () => {
  const trailOf = async (path: string, headers: Record<string, string> = {}): Promise<string[]> => {
    const res = await get(engineA, path, headers);
    expect({ path, status: res.status }).toEqual({ path, status: 200 });
    return (res.json().request.context.trail as string[] | undefined) ?? [];
  };

  it('prefix, trailing /*, :param and encoded scopes cover exactly their paths', async () => {
    const expected: [string, string[]][] = [
      ['/scope/a', ['app::sPrefix']],
      ['/scope/a/', ['app::sPrefix', 'app::sWild']],
      ['/scope/a/x', ['app::sPrefix', 'app::sWild']],
      ['/scope/a/x/y', ['app::sPrefix', 'app::sWild']],
      ['/scope/ab', ['app::sEnc']],
      ['/scope/a/deep', ['app::sPrefix', 'app::sWild', 'app::sParam']],
      ['/scope/zzz/deep', ['app::sParam']],
      ['/scope/zzz/deep/more', ['app::sParam']],
      ['/scope/zzz/other', []],
      ['/scope/%61', ['app::sPrefix']],
      ['/scope/%61/x', ['app::sPrefix', 'app::sWild']],
      ['/scope/%61%62', ['app::sEnc']],
    ];
    for (const [path, trail] of expected) expect({ path, trail: await trailOf(path) }).toEqual({ path, trail });
  });

  it('middleware without scope, with "/" and with "/*" cover every request, "/" included', async () => {
    const globals = ['app::gNone', 'app::gRoot', 'app::gStar'];
    for (const path of ['/', '/global/x', '/scope/zzz/other']) {
      expect({ path, trail: await trailOf(path, { 'x-global': '1' }) }).toEqual({ path, trail: globals });
    }
    // A request no route matches still goes through onRequest.
    const id = rid('global-404');
    const res = await get(engineA, '/no/such/route', { 'x-global': '1', 'x-request-id': id });
    expectErrorEnvelope(res, 404, 'NOT_FOUND');
    expect(fns(await records(engineA, id))).toEqual(globals);
  });

  it('a percent-encoded path cannot bypass a scoped auth middleware', async () => {
    const before = await handlerCalls(engineA, 'app::admin');
    for (const path of ['/admin', '/admin/panel', '/%61dmin', '/%61dmin/panel', '/adm%69n/panel', '/admin/%70anel', '/%61%64%6d%69%6e/panel']) {
      const res = await get(engineA, path);
      expect({ path, status: res.status, body: res.json() }).toEqual({ path, status: 401, body: { error: 'unauthorized' } });
      expect(res.headers['www-authenticate']).toBe('Bearer');
    }
    expect(await handlerCalls(engineA, 'app::admin')).toBe(before);
    const res = await get(engineA, '/%61dmin/panel', { authorization: 'Bearer ok' });
    expect(res.status).toBe(200);
    expect(res.json().fn).toBe('app::admin');
    expect(res.json().request.path).toBe('/%61dmin/panel');
    expect(res.json().request.context).toStrictEqual({ user: 'ann' });
    expect(await handlerCalls(engineA, 'app::admin')).toBe(before + 1);
  });
});

describe('onRequest rewrites', () => {
  const rewrite = (patch: Record<string, unknown>) => ({ 'x-act-rw': `raw:${JSON.stringify({ action: 'continue', request: patch })}` });

  it('routes by the patched path and method', async () => {
    const plain = await get(engineA, '/rewrite/from');
    expect(plain.json().fn).toBe('app::rwFrom');

    const byPath = await get(engineA, '/rewrite/from', rewrite({ path: '/target/to' }));
    expect(byPath.status).toBe(200);
    expect(byPath.json().fn).toBe('app::rwTo');
    expect(byPath.json().request.path).toBe('/target/to');
    expect(byPath.json().request.trigger).toStrictEqual({ type: 'http', path: '/target/to', method: 'GET' });

    const byMethod = await get(engineA, '/rewrite/from', rewrite({ path: '/target/to', method: 'delete' }));
    expect(byMethod.json().fn).toBe('app::rwToDelete');
    expect(byMethod.json().request.method).toBe('DELETE');
    expect(byMethod.json().request.trigger).toStrictEqual({ type: 'http', path: '/target/to', method: 'DELETE' });

    expectErrorEnvelope(await get(engineA, '/rewrite/from', rewrite({ path: '/nowhere' })), 404, 'NOT_FOUND');
  });

  it('scopes later phases by the patched path: a rewrite into /admin meets the auth middleware', async () => {
    const res = await get(engineA, '/rewrite/from', rewrite({ path: '/admin/panel' }));
    expect(res.status).toBe(401);
    expect(res.json()).toStrictEqual({ error: 'unauthorized' });
  });

  it('merges header, query and body patches; ignores engine-owned fields', async () => {
    const id = rid('rewrite-fields');
    const res = await get(engineA, '/rewrite/from', {
      'x-request-id': id,
      ...rewrite({ headers: { 'x-added': 'yes' }, query_params: { added: '1' }, body: { b: [1, 2] }, request_id: 'forged', ip: '1.2.3.4', trigger: { path: '/x' } }),
    });
    expect(res.status).toBe(200);
    const request = res.json().request;
    expect(request.headers['x-added']).toBe('yes');
    expect(request.headers['x-request-id']).toBe(id);
    expect(request.query_params).toStrictEqual({ added: '1' });
    expect(request.body).toStrictEqual({ b: [1, 2] });
    expect(request.request_id).toBe(id);
    expect(request.ip).toBe('127.0.0.1');
    expect(request.trigger).toStrictEqual({ type: 'http', path: '/rewrite/from', method: 'GET' });

    const withQuery = await get(engineA, '/rewrite/from?q=0', rewrite({ query_params: { added: '1' } }));
    expect(withQuery.json().request.query_params).toStrictEqual({ q: '0', added: '1' });
  });

  it('refuses invalid path and method patches with 500 MIDDLEWARE_FAILED', async () => {
    for (const patch of [{ path: 'relative' }, { path: '/x?y=1' }, { path: 7 }, { method: 'GE T' }, { method: '' }, { headers: null }]) {
      const res = await get(engineA, '/rewrite/from', rewrite(patch));
      const envelope = expectErrorEnvelope(res, 500, 'MIDDLEWARE_FAILED');
      expect(envelope.error.message).toBe('middleware app::rw failed in onRequest');
    }
    // The refused patch left nothing behind that breaks the engine (a `{path: 7}` once crashed it).
    expect((await get(engineA, '/rewrite/from')).json().fn).toBe('app::rwFrom');
    expect(engineA.stdout.lines.filter((l) => l.includes('request failed inside the engine'))).toEqual([]);
  });
});

describe('middleware_function_ids', () => {
  it('run in list order after the preHandler phase, as preHandler, with matched_route', async () => {
    const id = rid('ids');
    const res = await get(engineA, '/ids', { 'x-request-id': id });
    expect(res.status).toBe(200);
    // app::idsScoped has priority 1000 yet runs first: the route's list comes after the whole phase.
    expect(res.json().request.context).toStrictEqual({ trail: ['app::idsScoped', 'app::idsB', 'app::idsA'] });
    const list = await records(engineA, id);
    expect(fns(list)).toEqual(['app::idsScoped', 'app::idsB', 'app::idsA']);
    for (const fn of ['app::idsB', 'app::idsA']) {
      const input = only(list, fn);
      expect(input.phase).toBe('preHandler');
      expect(input.matched_route).toStrictEqual({ function_id: 'app::ids', path_pattern: '/ids' });
    }
  });

  it('respond and failures behave as in preHandler; an unserved id fails the request', async () => {
    const before = await handlerCalls(engineA, 'app::ids');
    const responded = await get(engineA, '/ids', { 'x-act-idsb': 'respond:409' });
    expect(responded.status).toBe(409);
    expect(responded.json()).toStrictEqual({ responded_by: 'app::idsB', phase: 'preHandler', trail: ['app::idsScoped'] });

    const failed = await get(engineA, '/ids', { 'x-act-idsa': 'throw' });
    expect(expectErrorEnvelope(failed, 500, 'invocation_failed').error.message).toBe('app::idsA exploded');
    expect(await handlerCalls(engineA, 'app::ids')).toBe(before);

    const missingBefore = await handlerCalls(engineA, 'app::idsMissing');
    const id = rid('ids-missing');
    const missing = await get(engineA, '/ids-missing', { 'x-request-id': id });
    expect(expectErrorEnvelope(missing, 500, 'MIDDLEWARE_FAILED').error.message).toBe('middleware nobody::mw failed in preHandler');
    expect(fns(await records(engineA, id))).toEqual(['app::idsB']);
    expect(await handlerCalls(engineA, 'app::idsMissing')).toBe(missingBefore);
  });
});

describe('prototype pollution through patches', () => {
  it('drops __proto__/constructor/prototype keys: the handler sees clean objects and the engine keeps serving', async () => {
    const patch =
      '{"action":"continue",' +
      '"context":{"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}},' +
      '"nested":{"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}},"ok":1}},' +
      '"request":{"headers":{"__proto__":{"polluted":"yes"},"x-safe":"1"},"body":{"prototype":{"polluted":"yes"},"b":1}}}';
    const id = rid('pollute');
    const res = await get(engineA, '/phases/ok/1', { 'x-request-id': id, 'x-act-pre': `raw:${patch}` });
    expect(res.status).toBe(200);
    const body = res.json();
    expect(body.probe).toStrictEqual({ objectPrototype: null, context: null, contextNested: null, headers: null });
    expect(body.request.context).toStrictEqual({ trail: ['app::req', 'app::req2'], nested: { ok: 1 } });
    expect(body.request.headers['x-safe']).toBe('1');
    expect(body.request.body).toStrictEqual({ b: 1 });
    expect(Object.keys(body.request.headers)).not.toContain('__proto__');
    expect(JSON.stringify([body.request.context, body.request.body])).not.toContain('polluted');
    const warning = await engineA.stdout.waitFor((l) => l.includes('refused') && l.includes(id), 5000, 'refused-keys warning');
    expect(JSON.parse(warning)).toMatchObject({ functionId: 'app::pre', requestId: id, refusedKeys: 6 });

    // Later requests are unaffected.
    const next = await get(engineA, '/phases/ok/2');
    expect(next.status).toBe(200);
    expect(next.json().probe).toStrictEqual({ objectPrototype: null, context: null, contextNested: null, headers: null });
    expect(next.json().request.context).toStrictEqual({ trail: PHASE_TRAIL });
  });
});

describe('invalid http_middleware registrations (raw ws client)', () => {
  it('are refused with a triggerregistrationresult error and never applied; valid ones apply until the worker leaves', async () => {
    const raw = await RawWorker.connect(engineA.workerUrl);
    rawWorkers.push(raw);
    const seen: any[] = [];
    raw.serve('raw::page', () => ({ status_code: 200, body: { page: true } }));
    raw.serve('raw::mw', (data) => {
      seen.push(data);
      return { action: 'respond', response: { status_code: 418, body: { from: 'raw::mw' } } };
    });
    raw.route('raw::page', 'GET', '/raw-mw/page');
    raw.send({ type: 'registerfunction', id: 'raw::mw' });

    const invalid: Record<string, unknown>[] = [
      {},
      { phase: 'onrequest', scope: { path: '/raw-mw' } },
      { phase: 'OnRequest' },
      { phase: 7 },
      { phase: null },
      { phase: 'onRequest', scope: { path: '/raw-mw' }, priority: 'high' },
      { phase: 'onRequest', scope: { path: '/raw-mw' }, priority: true },
      { phase: 'onRequest', scope: { path: '/raw-mw' }, priority: [1] },
      { phase: 'onRequest', scope: '/raw-mw' },
      { phase: 'onRequest', scope: {} },
      { phase: 'onRequest', scope: ['/raw-mw'] },
      { phase: 'onRequest', scope: { path: 7 } },
      { phase: 'onRequest', scope: { path: '/raw-mw/:1bad' } },
      { phase: 'onRequest', scope: { path: '/raw-mw?x=1' } },
      { phase: 'onRequest', scope: { path: '/raw-mw#f' } },
      { phase: 'onRequest', scope: { path: '/raw mw' } },
      { phase: 'onRequest', scope: { path: '/raw-mw/:1bad' } },
      { phase: 'onRequest', scope: { path: '/raw-mw/:a/:a' } },
    ];
    for (const [index, config] of invalid.entries()) {
      raw.send({ type: 'registertrigger', id: `bad-mw-${index}`, trigger_type: 'http_middleware', function_id: 'raw::mw', config });
      const result = await raw.next((f) => f.type === 'triggerregistrationresult' && f.id === `bad-mw-${index}`);
      expect({ index, result }).toMatchObject({
        index,
        result: { trigger_type: 'http_middleware', function_id: 'raw::mw', error: { code: 'invalid_trigger_config' } },
      });
      expect(typeof result.error.message).toBe('string');
    }
    await raw.sync();
    const untouched = await get(engineA, '/raw-mw/page');
    expect(untouched.status).toBe(200);
    expect(untouched.json()).toStrictEqual({ page: true });
    expect(seen).toEqual([]);

    raw.send({ type: 'registertrigger', id: 'good-mw', trigger_type: 'http_middleware', function_id: 'raw::mw', config: { phase: 'onRequest', scope: { path: '/raw-mw/*' }, priority: null } });
    await raw.sync();
    expect(raw.frames.filter((f) => f.type === 'triggerregistrationresult')).toEqual([]);
    const id = rid('raw-mw');
    const answered = await get(engineA, '/raw-mw/page?x=1', { 'x-request-id': id });
    expect(answered.status).toBe(418);
    expect(answered.json()).toStrictEqual({ from: 'raw::mw' });
    expect(seen).toHaveLength(1);
    expect(Object.keys(seen[0]).sort()).toEqual(['context', 'phase', 'request']);
    expect(seen[0].phase).toBe('onRequest');
    expect(seen[0].context).toStrictEqual({});
    expect(Object.keys(seen[0].request).sort()).toEqual(REQUEST_KEYS);
    expect(seen[0].request).toMatchObject({ path: '/raw-mw/page', method: 'GET', query_params: { x: '1' }, request_id: id, ip: '127.0.0.1' });

    await raw.close();
    await waitForStatus(`${engineA.httpUrl}/raw-mw/page`, (s) => s === 404);
  });
});

describe('middleware from a second worker', () => {
  it('applies to the first worker\'s routes and disappears when that worker disconnects', async () => {
    extWorker = startWorker('middleware-worker', engineA.workerUrl, { ROLE: 'ext' });
    await waitForStatus(`${engineA.httpUrl}/ext-ready`, (s) => s === 200, {}, WORKER_READY_MS);
    const withExt = await get(engineA, '/phases/ok/1');
    expect(withExt.json().request.context).toStrictEqual({ trail: [...PHASE_TRAIL, 'ext::tag'] });
    const answered = await get(engineA, '/phases/ok/1', { 'x-act-tag': 'respond:418' });
    expect(answered.status).toBe(418);
    expect(answered.json()).toStrictEqual({ responded_by: 'ext::tag', phase: 'preHandler', trail: PHASE_TRAIL });

    await extWorker.stop();
    extWorker = undefined;
    await waitForStatus(`${engineA.httpUrl}/ext-ready`, (s) => s === 404);
    const before = await handlerCalls(engineA, 'app::phOk');
    const without = await get(engineA, '/phases/ok/1', { 'x-act-tag': 'respond:418' });
    expect(without.status).toBe(200);
    expect(without.json().request.context).toStrictEqual({ trail: PHASE_TRAIL });
    expect(await handlerCalls(engineA, 'app::phOk')).toBe(before + 1);
  });
});

describe('engine with a RestApiModule `middleware` list and a short default_timeout', () => {
  const CFG_TRAIL = ['cfg::raw', 'cfg::first', 'cfg::second', 'tb::p0', 'cfg::late', 'tb::p10'];

  it('runs configured middleware with registered ones: by priority, configured first on ties, in config order', async () => {
    const res = await get(engineB, '/t/ok');
    expect(res.status).toBe(200);
    expect(res.json().request.context).toStrictEqual({ trail: CFG_TRAIL });
  });

  it('onTimeout: gets error and matched_route, its respond replaces the 504; failing or continuing keeps the 504', async () => {
    const before = await handlerCalls(engineB, 'tb::ok');
    const cases: { name: string; path: string; headers: Record<string, string>; status: number; trail: string[] }[] = [
      { name: 'continue', path: '/t/slow?ms=4000', headers: {}, status: 504, trail: CFG_TRAIL },
      { name: 'respond', path: '/t/slow?ms=4000', headers: { 'x-act-tmo': 'respond:503' }, status: 503, trail: CFG_TRAIL },
      { name: 'throw', path: '/t/slow?ms=4000', headers: { 'x-act-tmo': 'throw' }, status: 504, trail: CFG_TRAIL },
      { name: 'bad result', path: '/t/slow?ms=4000', headers: { 'x-act-tmo': 'raw:{"action":"later"}' }, status: 504, trail: CFG_TRAIL },
      { name: 'onTimeout too slow', path: '/t/slow?ms=4000', headers: { 'x-act-tmo': 'sleep:4000' }, status: 504, trail: CFG_TRAIL },
      // The deadline bounds middleware too: a slow preHandler or postHandler middleware ends in onTimeout.
      { name: 'preHandler too slow', path: '/t/ok', headers: { 'x-act-p0': 'sleep:4000' }, status: 504, trail: ['cfg::raw', 'cfg::first', 'cfg::second'] },
      { name: 'postHandler too slow', path: '/t/ok', headers: { 'x-act-post': 'sleep:4000' }, status: 504, trail: CFG_TRAIL },
    ];
    const results = await Promise.all(
      cases.map(async (c) => {
        const id = rid(`tmo-${c.name.replace(/ /g, '-')}`);
        const started = performance.now();
        const res = await get(engineB, c.path, { ...c.headers, 'x-request-id': id });
        return { ...c, id, res, elapsedMs: performance.now() - started };
      }),
    );
    for (const r of results) {
      expect({ name: r.name, status: r.res.status }).toEqual({ name: r.name, status: r.status });
      expect(r.elapsedMs, r.name).toBeGreaterThanOrEqual(B_TIMEOUT_MS - 50);
      expect(r.elapsedMs, r.name).toBeLessThan(B_TIMEOUT_MS + ERROR_PHASE_BUDGET_MS + 1500);
      if (r.status === 504) expectErrorEnvelope(r.res, 504, 'TIMEOUT');
      const onTimeout = only(await records(engineB, r.id), 'tb::tmo');
      expect(Object.keys(onTimeout).sort()).toEqual(['context', 'error', 'matched_route', 'phase', 'request']);
      expect(onTimeout.phase).toBe('onTimeout');
      expect(onTimeout.error.code).toBe('TIMEOUT');
      expect({ name: r.name, context: onTimeout.context }).toStrictEqual({ name: r.name, context: { trail: r.trail } });
      expect(typeof onTimeout.error.message).toBe('string');
      const fn = r.path.startsWith('/t/slow') ? 'tb::slow' : 'tb::ok';
      expect(onTimeout.matched_route).toStrictEqual({ function_id: fn, path_pattern: r.path.split('?')[0] });
    }
    const respond = results.find((r) => r.name === 'respond');
    expect(respond?.res.json()).toStrictEqual({ responded_by: 'tb::tmo', phase: 'onTimeout', trail: CFG_TRAIL });
    expect(respond?.res.headers['x-responded-by']).toBe('tb::tmo');
    // The slow preHandler kept the handler from running; the slow postHandler ran after it.
    expect(await handlerCalls(engineB, 'tb::ok')).toBe(before + 1);
  });

  it('a configured middleware no worker serves fails every request with 500 MIDDLEWARE_FAILED, handler not called', async () => {
    const before = await handlerCalls(engineB, 'tb::ok');
    const raw = rawWorkers.find((w) => w.ws.url.startsWith(engineB.workerUrl));
    expect(raw).toBeDefined();
    await raw?.close();
    // Requests wait the reconnect grace (300 ms here) for cfg::raw to come back, then fail closed.
    const res = await waitForStatus(`${engineB.httpUrl}/t/ok`, (s) => s !== 200);
    expect(expectErrorEnvelope(res, 500, 'MIDDLEWARE_FAILED').error.message).toBe('middleware cfg::raw failed in onRequest');
    expectErrorEnvelope(await get(engineB, '/t/ok'), 500, 'MIDDLEWARE_FAILED');

    await serveCfgRaw();
    const back = await waitForStatus(`${engineB.httpUrl}/t/ok`, (s) => s === 200);
    expect(back.json().request.context).toStrictEqual({ trail: CFG_TRAIL });
    // Only the final, successful request reached the handler.
    expect(await handlerCalls(engineB, 'tb::ok')).toBe(before + 1);
  });
});
