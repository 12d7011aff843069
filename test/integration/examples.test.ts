import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, waitForStatus } from '../support/http.js';
import type { EngineHandle, ManagedProcess } from '../support/processes.js';
import { QUICK_GRACE_MS, ROOT, WORKER_READY_MS, spawnManaged, startEngine, stopProcess } from '../support/processes.js';

/**
 * The workers in examples/ run as they are documented: real processes, `node examples/<name>.mjs`, with
 * iii-sdk resolved from the repository's node_modules, against a real engine.
 */
const EXAMPLES = join(ROOT, 'examples');

function startExample(file: string, workerUrl: string, env: NodeJS.ProcessEnv = {}): ManagedProcess {
  return spawnManaged(process.execPath, [join(EXAMPLES, file)], {
    ...process.env,
    OTEL_ENABLED: 'false',
    III_URL: workerUrl,
    ...env,
  });
}

const running: ManagedProcess[] = [];
function example(file: string, workerUrl: string, env: NodeJS.ProcessEnv = {}): ManagedProcess {
  const p = startExample(file, workerUrl, env);
  running.push(p);
  return p;
}

/** Stops an example with SIGTERM and expects the clean exit the examples promise (code 0, no signal). */
async function expectCleanStop(p: ManagedProcess): Promise<void> {
  const result = await stopProcess(p, 'SIGTERM', 5000);
  expect(result, `stderr:\n${p.stderr.lines.join('\n')}`).toStrictEqual({ code: 0, signal: null });
}

const jsonLines = (p: ManagedProcess) => p.stdout.json();

describe('examples against one engine', () => {
  let engine: EngineHandle;

  beforeAll(async () => {
    engine = await startEngine({ logLevel: 'info', workers: { reconnect_grace_ms: QUICK_GRACE_MS } });
  });
  afterAll(async () => {
    await Promise.all(running.map((p) => stopProcess(p, 'SIGKILL')));
    await engine?.stop();
  });

  describe('hello-worker.mjs', () => {
    let hello: ManagedProcess;
    beforeAll(async () => {
      hello = example('hello-worker.mjs', engine.workerUrl);
      await waitForStatus(`${engine.httpUrl}/hello/ready`, (s) => s === 200, {}, WORKER_READY_MS);
    });

    it('serves GET /hello/:name with the name, the query and the request id', async () => {
      const res = await http(`${engine.httpUrl}/hello/world?lang=en`, { headers: { 'x-request-id': 'hello-rid-1' } });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.json()).toStrictEqual({ hello: 'world', query: { lang: 'en' }, requestId: 'hello-rid-1' });
    });

    it('only GET is routed: another method on its path is answered 405 with Allow', async () => {
      const res = await http(`${engine.httpUrl}/hello/world`, { method: 'POST', body: '{}' });
      expect(res.status).toBe(405);
      expect(res.headers.allow).toContain('GET');
    });

    it('shuts down cleanly on SIGTERM, and its route goes away', async () => {
      await expectCleanStop(hello);
      await waitForStatus(`${engine.httpUrl}/hello/world`, (s) => s === 404);
    });
  });

  describe('sse-worker.mjs', () => {
    let sse: ManagedProcess;
    beforeAll(async () => {
      sse = example('sse-worker.mjs', engine.workerUrl);
      await waitForStatus(`${engine.httpUrl}/ticks?count=1`, (s) => s === 200, {}, WORKER_READY_MS);
    });

    it('streams GET /ticks?count=3 as three Server-Sent Events', async () => {
      const res = await http(`${engine.httpUrl}/ticks?count=3`);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('text/event-stream');
      const events = res.text.split('\n\n').filter(Boolean);
      expect(events.map((event) => event.split('\n')[0])).toEqual(['id: 1', 'id: 2', 'id: 3']);
      expect(JSON.parse((events[2] as string).split('data: ')[1] as string)).toMatchObject({ tick: 3 });
    });

    it('shuts down cleanly on SIGTERM, and its route goes away', async () => {
      await expectCleanStop(sse);
      await waitForStatus(`${engine.httpUrl}/ticks`, (s) => s === 404);
    });
  });

  describe('middleware-worker.mjs', () => {
    const TOKEN = 'example-token-7f3a';
    let mw: ManagedProcess;
    const profile = () => `${engine.httpUrl}/secure/profile`;

    beforeAll(async () => {
      mw = example('middleware-worker.mjs', engine.workerUrl, { API_TOKEN: TOKEN });
      // The worker registers its middleware before the route, so once the route answers, the guard is on.
      await waitForStatus(profile(), (s) => s === 200, { headers: { authorization: `Bearer ${TOKEN}` } }, WORKER_READY_MS);
    });

    it('answers 401 without a token, before any route runs', async () => {
      const res = await http(profile(), { headers: { 'x-request-id': 'mw-no-token' } });
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
      expect(res.json()).toStrictEqual({ error: 'unauthorized', request_id: 'mw-no-token' });
    });

    it('answers 401 with a wrong token or another scheme', async () => {
      for (const authorization of [`Bearer ${TOKEN}x`, 'Bearer ', `Basic ${TOKEN}`, TOKEN]) {
        const res = await http(profile(), { headers: { authorization } });
        expect(res.status, authorization).toBe(401);
      }
    });

    it('guards every path under /secure/, matched or not', async () => {
      // onRequest runs before matching: an unknown path under /secure/ is refused, not reported as missing.
      expect((await http(`${engine.httpUrl}/secure/nothing-here`)).status).toBe(401);
      expect((await http(`${engine.httpUrl}/secure/nothing-here`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(404);
    });

    it('answers 200 with the token; the handler sees the identity the middleware put in the context', async () => {
      const res = await http(profile(), { headers: { authorization: `Bearer ${TOKEN}`, 'x-request-id': 'mw-with-token' } });
      expect(res.status).toBe(200);
      expect(res.json()).toStrictEqual({ user: { subject: 'token-holder' }, requestId: 'mw-with-token' });
    });

    it('logs one onResponse line per request with its request id, status and duration', async () => {
      await http(profile(), { headers: { 'x-request-id': 'mw-timing-401' } });
      await http(profile(), { headers: { authorization: `Bearer ${TOKEN}`, 'x-request-id': 'mw-timing-200' } });
      for (const [rid, status] of [['mw-timing-401', 401], ['mw-timing-200', 200]] as const) {
        const line = await mw.stdout.waitFor((l) => l.includes(`"request_id":"${rid}"`), 10_000, `onResponse line for ${rid}`);
        const entry = JSON.parse(line);
        expect(entry).toMatchObject({ msg: 'response', request_id: rid, method: 'GET', path: '/secure/profile', status });
        // The onRequest timing stamp reached onResponse through the context (also on the 401 path).
        expect(typeof entry.duration_ms).toBe('number');
        expect(entry.duration_ms).toBeGreaterThanOrEqual(0);
        expect(entry.duration_ms).toBeLessThan(10_000);
      }
      expect(jsonLines(mw).filter((l) => l.request_id === 'mw-timing-200')).toHaveLength(1);
    });

    it('refuses to start without API_TOKEN', async () => {
      const p = startExample('middleware-worker.mjs', engine.workerUrl, { API_TOKEN: '' });
      const result = await p.exited;
      expect(result.code).toBe(1);
      expect(p.stderr.lines.join('\n')).toContain('API_TOKEN');
    });

    it('shuts down cleanly on SIGTERM, and its guard goes with it', async () => {
      await expectCleanStop(mw);
      await waitForStatus(profile(), (s) => s === 404);
    });
  });
});

describe('replicated-worker.mjs: several copies behind one route (engine requiring a worker token)', () => {
  const WORKER_TOKEN = 'worker-token-9c1e';
  let engine: EngineHandle;
  const replicas: ManagedProcess[] = [];
  const url = (n: number) => `${engine.httpUrl}/replica?n=${n}`;

  beforeAll(async () => {
    engine = await startEngine({ logLevel: 'info', workers: { auth_token: WORKER_TOKEN, reconnect_grace_ms: QUICK_GRACE_MS } });
    for (const name of ['alpha', 'beta']) {
      replicas.push(example('replicated-worker.mjs', engine.workerUrl, { REPLICA_NAME: name, III_TOKEN: WORKER_TOKEN }));
    }
    await waitForStatus(url(0), (s) => s === 200, {}, WORKER_READY_MS);
  });
  afterAll(async () => {
    await Promise.all(running.map((p) => stopProcess(p, 'SIGKILL')));
    await engine?.stop();
  });

  it('both copies answer, each with its name, pid and own counter, echoing the caller counter', async () => {
    // Both registered: wait until each has connected (the first may have answered before the second).
    const seen = new Map<string, { pid: number; served: number[] }>();
    const deadline = Date.now() + WORKER_READY_MS;
    let n = 1;
    while (seen.size < 2 || n <= 12) {
      const res = await http(url(n), { headers: { 'x-request-id': `replica-${n}` } });
      expect(res.status).toBe(200);
      const body = res.json<{ replica: string; pid: number; served: number; n: string; requestId: string }>();
      expect(body.n).toBe(String(n));
      expect(body.requestId).toBe(`replica-${n}`);
      expect(res.headers['x-replica']).toBe(body.replica);
      const entry = seen.get(body.replica) ?? { pid: body.pid, served: [] as number[] };
      expect(body.pid).toBe(entry.pid);
      entry.served.push(body.served);
      seen.set(body.replica, entry);
      n++;
      if (Date.now() > deadline) throw new Error(`only ${[...seen.keys()].join(', ')} answered`);
    }
    expect([...seen.keys()].sort()).toStrictEqual(['alpha', 'beta']);
    const pids = new Set([...seen.values()].map((e) => e.pid));
    expect(pids).toStrictEqual(new Set(replicas.map((p) => p.child.pid)));
    for (const { served } of seen.values()) {
      // Each copy counts its own requests: strictly increasing, by one.
      expect(served).toStrictEqual(served.map((_, i) => served[0]! + i));
    }
  });

  it('a copy without the worker token is refused; the route is served by the others only', async () => {
    const refusals = () => engine.stdout.lines.filter((l) => l.includes('worker refused: missing or invalid token')).length;
    const before = refusals();
    const intruder = example('replicated-worker.mjs', engine.workerUrl, { REPLICA_NAME: 'intruder', III_TOKEN: 'wrong' });
    // The engine refuses its connection (and each retry): once it has, nothing of it can be registered.
    await engine.stdout.waitFor(() => refusals() > before, WORKER_READY_MS, 'the intruder to be refused');
    for (let n = 0; n < 8; n++) {
      const res = await http(url(100 + n));
      expect(res.status).toBe(200);
      expect(res.json().replica).not.toBe('intruder');
    }
    await stopProcess(intruder, 'SIGKILL');
  });

  it('when one copy stops (SIGTERM, clean exit) the other serves every request', async () => {
    const [alpha, beta] = replicas as [ManagedProcess, ManagedProcess];
    const disconnectsBefore = engine.stdout.lines.filter((l) => l.includes('"worker disconnected"')).length;
    await expectCleanStop(alpha);
    expect(jsonLines(alpha).some((l) => l.msg === 'replica stopping' && l.signal === 'SIGTERM')).toBe(true);
    // The process has exited; wait until the engine has seen its socket close too (until then a call
    // may still go to it: retrying such calls on another replica is reconnect-grace work).
    await engine.stdout.waitFor(() => engine.stdout.lines.filter((l) => l.includes('"worker disconnected"')).length > disconnectsBefore);
    for (let n = 0; n < 8; n++) {
      const res = await http(url(200 + n));
      expect(res.status).toBe(200);
      expect(res.json().replica).toBe('beta');
    }
    await expectCleanStop(beta);
    await waitForStatus(url(300), (s) => s === 404);
  });
});

// ─── The documented commands, run as pasted ─────────────────────────────────────────────────────────
// examples/README.md's shell blocks and README.md's two worker snippets ("A worker in 20 lines", the SSE
// route) are read from the Markdown and run: worker command lines through `sh` (from the repository
// root, or from a scratch directory for the README snippets, saved there under the name their first line
// gives), curl lines replayed with undici against the test engine (curl's -s, -N, -i, -H), and their
// output compared with the `# …` comment the docs show (`…` stands for anything). Only the address
// changes: the test engine's ports instead of 3111/49134 (III_URL, which every example reads).

/** The fenced blocks of `lang` in the section under the heading `title` (to the next heading). */
function docBlocks(markdown: string, title: string, lang: string): string[] {
  const start = markdown.split('\n').findIndex((line) => /^#{2,4} /.test(line) && line.replace(/^#+ /, '') === title);
  if (start < 0) throw new Error(`no heading "${title}"`);
  const lines = markdown.split('\n').slice(start + 1);
  // The next heading outside a fenced block (shell comments inside blocks start with `#` too).
  let fenced = false;
  const end = lines.findIndex((line) => {
    if (line.startsWith('```')) fenced = !fenced;
    return !fenced && /^#{1,4} /.test(line);
  });
  const section = (end < 0 ? lines : lines.slice(0, end)).join('\n');
  return [...section.matchAll(new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```', 'gm'))].map((m) => m[1] as string);
}

/** Shell words of one line: single and double quotes, no expansion. */
function shellWords(line: string): string[] {
  return [...line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3] ?? '');
}

/** Runs a documented curl command (its comment stripped) against `httpUrl` instead of 127.0.0.1:3111; returns what curl prints. */
async function replayCurl(line: string, httpUrl: string): Promise<{ printed: string; status: number; headers: Record<string, unknown>; chunkTimes: number[] }> {
  const words = shellWords(line.replace(/\s+#.*$/, ''));
  expect(words[0]).toBe('curl');
  let url = '';
  let include = false;
  const headers: Record<string, string> = {};
  for (let i = 1; i < words.length; i++) {
    const word = words[i] as string;
    if (word === '-H') {
      const [name, ...value] = (words[++i] as string).split(':');
      headers[(name as string).toLowerCase()] = value.join(':').trim();
    } else if (word === '-i') include = true;
    else if (word === '-m') i++;
    else if (word === '-s' || word === '-N') continue;
    else if (word.startsWith('-')) throw new Error(`the test does not replay curl's ${word}`);
    else url = word;
  }
  expect(url.startsWith('http://127.0.0.1:3111/')).toBe(true);
  const res = await request(url.replace('http://127.0.0.1:3111', httpUrl), { headers });
  const chunkTimes: number[] = [];
  let body = '';
  for await (const chunk of res.body) {
    chunkTimes.push(Date.now());
    body += (chunk as Buffer).toString('utf8');
  }
  const head = include ? `HTTP/1.1 ${res.statusCode}\n${Object.entries(res.headers).map(([k, v]) => `${k}: ${String(v)}`).join('\n')}\n\n` : '';
  return { printed: head + body, status: res.statusCode, headers: res.headers, chunkTimes };
}

/** The output a docs comment shows: `# …` lines under the command (or the comment on its line), `…` for anything. */
function expectedOutput(block: string, commandLine: string): RegExp | undefined {
  const lines = block.split('\n');
  const at = lines.indexOf(commandLine);
  const below: string[] = [];
  for (const line of lines.slice(at + 1)) {
    if (!line.startsWith('#')) break;
    below.push(line.replace(/^# ?/, ''));
  }
  const text = below.length > 0 ? below.join('\n') : /\s#\s+(\{.*)$/.exec(commandLine)?.[1];
  if (text === undefined) return undefined;
  const pattern = text.split('…').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[\\s\\S]*');
  return new RegExp(`^${pattern}${text.endsWith('…') ? '' : '\\s*$'}`);
}

const running2: ManagedProcess[] = [];
/** A documented worker command line (a trailing `&` dropped) through sh, in `cwd`, connected to `workerUrl`. */
function runDocumented(line: string, cwd: string, workerUrl: string): ManagedProcess {
  const p = spawnManaged('sh', ['-c', line.replace(/\s*&\s*$/, '')], { ...process.env, III_URL: workerUrl }, cwd, true);
  running2.push(p);
  return p;
}
async function stopDocumented(p: ManagedProcess): Promise<void> {
  if (p.child.exitCode === null && p.child.signalCode === null && p.child.pid !== undefined) process.kill(-p.child.pid, 'SIGTERM');
  await p.exited;
}

describe('the documented commands, run as pasted (examples/README.md, README.md)', () => {
  const EXAMPLES_README = readFileSync(join(EXAMPLES, 'README.md'), 'utf8');
  const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
  let engine: EngineHandle;
  let scratch: string;

  beforeAll(async () => {
    engine = await startEngine({ logLevel: 'info' });
    scratch = mkdtempSync(join(tmpdir(), 'switchyard-docs-'));
    // What `npm install iii-sdk @iii-dev/helpers` gives the snippets: the same packages, from the repository.
    symlinkSync(join(ROOT, 'node_modules'), join(scratch, 'node_modules'), 'dir');
  });
  afterAll(async () => {
    await Promise.all(running2.map((p) => stopDocumented(p)));
    await engine?.stop();
    rmSync(scratch, { recursive: true, force: true });
  }, 60_000);

  /**
   * Replays `curlLine` of `block` once the route answers as `ready` wants (a person waits for the worker
   * to start; 200 by default: an earlier test's worker on the same route may still be in its reconnect
   * grace, answering 503), and checks the output shown under it.
   */
  async function curlAsShown(block: string, curlLine: string, ready: (status: number) => boolean = (s) => s === 200) {
    const deadline = Date.now() + WORKER_READY_MS;
    let result = await replayCurl(curlLine, engine.httpUrl);
    while (!ready(result.status)) {
      if (Date.now() > deadline) throw new Error(`${curlLine}: still ${result.status} after ${WORKER_READY_MS} ms: ${result.printed.slice(0, 200)}`);
      await new Promise((r) => setTimeout(r, 100));
      result = await replayCurl(curlLine, engine.httpUrl);
    }
    const expected = expectedOutput(block, curlLine);
    if (expected !== undefined) expect(result.printed).toMatch(expected);
    return result;
  }

  it('examples/README.md, hello-worker.mjs: the worker command and the curl answer shown', async () => {
    const [block] = docBlocks(EXAMPLES_README, 'hello-worker.mjs', 'sh');
    const [command, curl] = block!.trim().split('\n') as [string, string];
    expect(command).toMatch(/node examples\/hello-worker\.mjs$/);
    const worker = runDocumented(command, ROOT, engine.workerUrl);
    await curlAsShown(block!, curl);
    await stopDocumented(worker);
  }, 60_000);

  it('examples/README.md, middleware-worker.mjs: 401 with WWW-Authenticate: Bearer, the profile with the token, the onResponse line', async () => {
    const [block, logBlock] = [docBlocks(EXAMPLES_README, 'middleware-worker.mjs', 'sh')[0]!, docBlocks(EXAMPLES_README, 'middleware-worker.mjs', 'json')[0]!];
    const [command, without, withToken] = block.trim().split('\n') as [string, string, string];
    expect(command).toMatch(/^API_TOKEN=\S+ .*node examples\/middleware-worker\.mjs$/);
    const worker = runDocumented(command, ROOT, engine.workerUrl);
    // `# 401, WWW-Authenticate: Bearer`: the status and the header curl -i shows.
    const [, status, header, scheme] = /#\s*(\d{3}), ([\w-]+): (\w+)/.exec(without) as RegExpExecArray;
    const refused = await curlAsShown(block, without, (s) => s === Number(status));
    expect(refused.printed).toMatch(new RegExp(`^HTTP/1.1 ${status}\\n[\\s\\S]*^${header!.toLowerCase()}: ${scheme}`, 'm'));
    await curlAsShown(block, withToken);
    // The worker's line, as shown: the same keys, the same fixed values (the timing and id vary).
    const shown = JSON.parse(logBlock) as Record<string, unknown>;
    const line = await worker.stdout.waitFor((l) => l.includes('"msg":"response"') && l.includes(`"status":${String(shown.status)}`), 10_000, 'the onResponse line');
    const printed = JSON.parse(line) as Record<string, unknown>;
    expect(Object.keys(printed)).toEqual(Object.keys(shown));
    expect(printed).toMatchObject({ msg: shown.msg, method: shown.method, path: shown.path, status: shown.status });
    await stopDocumented(worker);
  }, 60_000);

  it('examples/README.md, replicated-worker.mjs: two copies, the loop\'s answers name them and echo n', async () => {
    const block = docBlocks(EXAMPLES_README, 'replicated-worker.mjs', 'sh')[0]!;
    const lines = block.trim().split('\n');
    const copies = lines.filter((l) => /node examples\/replicated-worker\.mjs &$/.test(l)).map((l) => runDocumented(l, ROOT, engine.workerUrl));
    expect(copies).toHaveLength(2);
    // `sleep 2` stands for "until both copies registered": waited for here, not timed.
    expect(lines.some((l) => /^sleep \d/.test(l))).toBe(true);
    const names = new Set<string>();
    const deadline = Date.now() + WORKER_READY_MS;
    while (names.size < 2 && Date.now() < deadline) {
      const res = await http(`${engine.httpUrl}/replica`);
      if (res.status === 200) names.add(res.json<{ replica: string }>().replica);
      else await new Promise((r) => setTimeout(r, 100));
    }
    expect([...names].sort()).toEqual(['a', 'b']);
    const loop = /^for n in ([\d ]+); do (curl .*?); echo; done$/.exec(lines.find((l) => l.startsWith('for n in')) ?? '') as RegExpExecArray;
    const shown = lines.filter((l) => l.startsWith('# {')).map((l) => JSON.parse(l.slice(2).replace(/…/g, '0').replace(/,0\}$/, '}')) as Record<string, unknown>);
    const answered = new Set<string>();
    for (const n of loop[1]!.trim().split(' ')) {
      const { printed, status } = await replayCurl(loop[2]!.replace('$n', n), engine.httpUrl);
      expect(status).toBe(200);
      const body = JSON.parse(printed) as Record<string, unknown>;
      for (const key of Object.keys(shown[0]!)) expect(body).toHaveProperty(key);
      expect(body.n).toBe(n);
      answered.add(body.replica as string);
    }
    expect([...answered].sort()).toEqual(['a', 'b']);
    await Promise.all(copies.map((p) => stopDocumented(p)));
  }, 60_000);

  it('README.md, "A worker in 20 lines": saved as its first line says, run, answers as shown', async () => {
    const [js] = docBlocks(README, 'A worker in 20 lines', 'js');
    const [sh] = docBlocks(README, 'A worker in 20 lines', 'sh');
    const file = /^\/\/ (\S+\.mjs) — /.exec(js!)?.[1] as string;
    writeFileSync(join(scratch, file), js!);
    const [command, curl] = sh!.trim().split('\n') as [string, string];
    expect(command).toBe(`node ${file} &`);
    const worker = runDocumented(command, scratch, engine.workerUrl);
    await curlAsShown(sh!, curl);
    await stopDocumented(worker);
  }, 60_000);

  it('README.md, the SSE route: saved as its first line says, run, the events arrive one by one as shown', async () => {
    const [js] = docBlocks(README, 'Streaming: an SSE route', 'js');
    const [sh] = docBlocks(README, 'Streaming: an SSE route', 'sh');
    const file = /^\/\/ (\S+\.mjs) — /.exec(js!)?.[1] as string;
    writeFileSync(join(scratch, file), js!);
    const [command, curl] = sh!.trim().split('\n') as [string, string];
    expect(command).toBe(`node ${file} &`);
    const worker = runDocumented(command, scratch, engine.workerUrl);
    const { printed, headers, chunkTimes } = await curlAsShown(sh!, curl);
    expect(headers['content-type']).toBe('text/event-stream');
    expect(printed.split('\n\n').filter(Boolean).map((e) => e.split('\n')[0])).toEqual(['id: 1', 'id: 2', 'id: 3', 'id: 4', 'id: 5']);
    // Written 200 ms apart and sent as written: the last event comes well after the first.
    expect(chunkTimes.length).toBeGreaterThan(1);
    expect(chunkTimes.at(-1)! - chunkTimes[0]!).toBeGreaterThan(400);
    await stopDocumented(worker);
  }, 60_000);
});
