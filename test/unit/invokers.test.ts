import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { PeerCalls } from '../../src/cluster/cluster-invoker.js';
import { ClusterInvoker } from '../../src/cluster/cluster-invoker.js';
import type { ForwardResult } from '../../src/forwarding/forward-client.js';
import { GraceInvoker } from '../../src/invocation/grace-invoker.js';
import type { InvocationOutcome, InvokeOptions, Invoker } from '../../src/invocation/invoker.js';
import { engineFailure } from '../../src/invocation/invoker.js';
import type { FunctionRecord } from '../../src/routing/registrations.js';
import { RecentTraceOwners } from '../../src/observability/trace-owners.js';
import { RouteTable } from '../../src/routing/route-table.js';
import type { InvokableMember } from '../../src/workers/local-invoker.js';
import { LocalInvoker } from '../../src/workers/local-invoker.js';
import { WorkerHub } from '../../src/workers/worker-hub.js';

const logger = pino({ level: 'silent' });
const options = (ms = 5000): InvokeOptions => ({ deadline: performance.now() + ms });
type Handler = (functionId: string, data: unknown) => InvocationOutcome;

/** A worker connection that answers with `handler` and records what it was sent. */
function member(id: string, functionIds: string[], handler: Handler): InvokableMember & { calls: string[]; fired: string[] } {
  const calls: string[] = [];
  const fired: string[] = [];
  return {
    id,
    reattachToken: `t-${id}`,
    connectedAt: 0,
    functions: new Map<string, FunctionRecord>(functionIds.map((fn) => [fn, { id: fn, workerId: id }])),
    triggers: new Map(),
    triggerTypes: new Map(),
    customTriggers: new Map(),
    info: {},
    isOpen: true,
    retire: () => undefined,
    calls,
    fired,
    invoke: (functionId, data) => {
      calls.push(functionId);
      return Promise.resolve(handler(functionId, data));
    },
    fire: (functionId) => {
      fired.push(functionId);
      return true;
    },
  };
}

function hubWith(...members: ReturnType<typeof member>[]): WorkerHub<ReturnType<typeof member>> {
  const hub = new WorkerHub<ReturnType<typeof member>>('self');
  for (const m of members) {
    hub.add(m);
    for (const fn of m.functions.keys()) hub.functionAdded(m, fn);
  }
  return hub;
}

const echo: Handler = (functionId, data) =>
  functionId === 'fails' ? { ok: false, failure: { source: 'worker', code: 'invocation_failed', message: 'boom' } } : { ok: true, value: { functionId, data } };

/** A peer pool whose peers run `echo`; `undispatched` peers refuse before any worker saw the call. */
function peers(undispatched: Set<string> = new Set()): PeerCalls & { log: string[] } {
  const log: string[] = [];
  return {
    log,
    invoke: (owner: string, functionId: string, data: unknown): Promise<ForwardResult> => {
      log.push(`${owner}:${functionId}`);
      if (undispatched.has(owner)) return Promise.resolve({ dispatched: false, reason: `${owner} unreachable` });
      return Promise.resolve({ dispatched: true, outcome: echo(functionId, data) });
    },
    fire: (owner: string, functionId: string) => {
      log.push(`fire ${owner}:${functionId}`);
      return true;
    },
  };
}

/** A table where `owners` (peer ids) serve `functionId`. */
function tableWith(entries: [owner: string, functionIds: string[]][]): RouteTable {
  const table = new RouteTable(false);
  for (const [owner, functionIds] of entries) {
    table.applySnapshot({ ownerId: owner, version: 1, functions: functionIds.map((id) => ({ id, workerId: `w-${owner}` })), triggers: [] });
  }
  table.current();
  return table;
}

/** Every invoker serves `echo` as `ok`, `fails` as a worker failure, and nothing else. */
const SUBJECTS: [string, () => Invoker][] = [
  ['LocalInvoker', () => new LocalInvoker(hubWith(member('w1', ['ok', 'fails'], echo)))],
  ['ClusterInvoker (forwarded)', () => new ClusterInvoker(new LocalInvoker(hubWith()), tableWith([['peer-b', ['ok', 'fails']]]), peers(), 'self', logger)],
  ['GraceInvoker over LocalInvoker', () => new GraceInvoker(new LocalInvoker(hubWith(member('w1', ['ok', 'fails'], echo))), new RouteTable(false), 5000)],
];

describe.each(SUBJECTS)('Invoker conformance: %s', (_name, make) => {
  it('answers a served function with its value', async () => {
    expect(await make().invoke('ok', { n: 1 }, options())).toEqual({ ok: true, value: { functionId: 'ok', data: { n: 1 } } });
  });

  it("relays a worker's failure with source worker, unchanged", async () => {
    expect(await make().invoke('fails', {}, options())).toEqual({ ok: false, failure: { source: 'worker', code: 'invocation_failed', message: 'boom' } });
  });

  it('resolves (never rejects) FUNCTION_UNAVAILABLE for a function nobody serves', async () => {
    const outcome = await make().invoke('missing', {}, options());
    expect(outcome.ok ? undefined : outcome.failure).toMatchObject({ source: 'engine', code: 'FUNCTION_UNAVAILABLE' });
  });

  it('says what it serves, and fires only what it serves', () => {
    const invoker = make();
    expect([invoker.has('ok'), invoker.has('missing')]).toEqual([true, false]);
    expect([invoker.fire('ok', {}), invoker.fire('missing', {})]).toEqual([true, false]);
  });
});

describe('LocalInvoker', () => {
  it('balances replicas round-robin and records which worker ran the call', async () => {
    const a = member('a', ['f'], echo);
    const b = member('b', ['f'], echo);
    const invoker = new LocalInvoker(hubWith(a, b));
    const traces: (string | undefined)[] = [];
    for (let i = 0; i < 4; i++) {
      const opts = { ...options(), trace: { forwarded: false } };
      await invoker.invoke('f', {}, opts);
      traces.push((opts.trace as { workerId?: string }).workerId);
    }
    expect([a.calls.length, b.calls.length]).toEqual([2, 2]);
    expect(traces).toEqual(['a', 'b', 'a', 'b']);
  });

  it('notes which worker each traced call went to (the worker id of its log records), and nothing for an untraced one', async () => {
    const a = member('a', ['f'], echo);
    const b = member('b', ['f'], echo);
    const owners = new RecentTraceOwners();
    const invoker = new LocalInvoker(hubWith(a, b), owners);
    const trace = '0af7651916cd43dd8448eb211c80319c';
    await invoker.invoke('f', {}, { ...options(), traceparent: `00-${trace}-b7ad6b7169203331-01` });
    expect(owners.ownerOf(trace)).toBe('a');
    // The same trace to the other replica (round-robin): it names nobody now.
    await invoker.invoke('f', {}, { ...options(), traceparent: `00-${trace}-00f067aa0ba902b7-01` });
    expect(owners.ownerOf(trace)).toBeNull();
    await invoker.invoke('f', {}, options());
    expect(owners.size).toBe(1);
    expect([a.calls.length, b.calls.length]).toEqual([2, 1]);
  });

  it('answers TIMEOUT without calling a worker when the deadline already passed', async () => {
    const a = member('a', ['f'], echo);
    const outcome = await new LocalInvoker(hubWith(a)).invoke('f', {}, { deadline: performance.now() - 1 });
    expect(outcome.ok ? undefined : outcome.failure.code).toBe('TIMEOUT');
    expect(a.calls).toEqual([]);
  });
});

describe('ClusterInvoker', () => {
  it('prefers a worker on this process over a peer', async () => {
    const local = member('w1', ['f'], echo);
    const pool = peers();
    const invoker = new ClusterInvoker(new LocalInvoker(hubWith(local)), tableWith([['peer-b', ['f']]]), pool, 'self', logger);
    await invoker.invoke('f', {}, options());
    expect(local.calls).toEqual(['f']);
    expect(pool.log).toEqual([]);
  });

  it('balances remote owners round-robin and marks the call forwarded', async () => {
    const pool = peers();
    const invoker = new ClusterInvoker(new LocalInvoker(hubWith()), tableWith([['peer-b', ['f']], ['peer-c', ['f']]]), pool, 'self', logger);
    const opts = { ...options(), trace: { forwarded: false } as { forwarded: boolean; peerId?: string } };
    for (let i = 0; i < 4; i++) await invoker.invoke('f', {}, i === 0 ? opts : options());
    expect(new Set(pool.log)).toEqual(new Set(['peer-b:f', 'peer-c:f']));
    expect(pool.log.filter((entry) => entry === 'peer-b:f')).toHaveLength(2);
    expect(opts.trace.forwarded).toBe(true);
  });

  it('keeps a turn per function: interleaved functions each spread over both owners', async () => {
    const pool = peers();
    const invoker = new ClusterInvoker(new LocalInvoker(hubWith()), tableWith([['peer-b', ['mw', 'handler']], ['peer-c', ['mw', 'handler']]]), pool, 'self', logger);
    for (let i = 0; i < 4; i++) {
      await invoker.invoke('mw', {}, options());
      await invoker.invoke('handler', {}, options());
    }
    for (let i = 0; i < 4; i++) {
      invoker.fire('mw', {});
      invoker.fire('handler', {});
    }
    const count = (entry: string): number => pool.log.filter((e) => e === entry).length;
    expect([count('peer-b:mw'), count('peer-c:mw'), count('peer-b:handler'), count('peer-c:handler')]).toEqual([2, 2, 2, 2]);
    expect([count('fire peer-b:mw'), count('fire peer-c:mw'), count('fire peer-b:handler'), count('fire peer-c:handler')]).toEqual([2, 2, 2, 2]);
  });

  it('tries the next owner when a forward never reached a worker, and reports the last reason when none could', async () => {
    const pool = peers(new Set(['peer-b']));
    const invoker = new ClusterInvoker(new LocalInvoker(hubWith()), tableWith([['peer-b', ['f']], ['peer-c', ['f']]]), pool, 'self', logger);
    for (let i = 0; i < 2; i++) expect(await invoker.invoke('f', {}, options())).toMatchObject({ ok: true });
    const down = new ClusterInvoker(new LocalInvoker(hubWith()), tableWith([['peer-b', ['f']]]), peers(new Set(['peer-b'])), 'self', logger);
    const outcome = await down.invoke('f', {}, options());
    expect(outcome.ok ? '' : `${outcome.failure.code}: ${outcome.failure.message}`).toBe('FUNCTION_UNAVAILABLE: no owner of f could take the call (peer-b unreachable)');
  });

  it('never retries a call that was dispatched, whatever its outcome', async () => {
    const log: string[] = [];
    const pool: PeerCalls = {
      invoke: (owner) => {
        log.push(owner);
        return Promise.resolve({ dispatched: true, outcome: engineFailure('WORKER_DISCONNECTED', 'link dropped after the write') });
      },
      fire: () => true,
    };
    const invoker = new ClusterInvoker(new LocalInvoker(hubWith()), tableWith([['peer-b', ['f']], ['peer-c', ['f']]]), pool, 'self', logger);
    const outcome = await invoker.invoke('f', {}, options());
    expect(outcome.ok ? undefined : outcome.failure.code).toBe('WORKER_DISCONNECTED');
    expect(log).toHaveLength(1);
  });

  it("ignores its own snapshot among the owners, and fires to a remote owner", () => {
    const pool = peers();
    const invoker = new ClusterInvoker(new LocalInvoker(hubWith()), tableWith([['self', ['f']], ['peer-b', ['f']]]), pool, 'self', logger);
    expect(invoker.fire('f', {})).toBe(true);
    expect(pool.log).toEqual(['fire peer-b:f']);
  });
});
