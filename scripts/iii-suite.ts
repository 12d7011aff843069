// iii's own Node SDK suite (sdk/packages/node/iii/tests at the iii checkout you point it to), files
// unchanged, run with iii's own runner (its vitest and vitest.config.ts) against Switchyard started
// with iii's own sdk/fixtures/config-test.yaml. Not part of `npm test`: it needs an iii checkout and
// iii's test dependencies, which this repository neither downloads nor vendors.
//
//   npm run compat:iii-suite -- --iii /path/to/iii [--mode embedded|redis] [--processes N]
//                               [--group http,core,modules | --files a.test.ts,b.test.ts]
//                               [--runs N] [--free-ports] [--install] [--keep]
//
// docs/compatibility.md ("iii's own SDK suite") says what each group holds and why.
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import type { RedisServer } from '../test/support/redis.js';
import { freePort, startRedisServer } from '../test/support/redis.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const ENGINE_BIN = join(ROOT, 'bin', 'switchyard.js');

/**
 * The groups, by what a file's tests need from the engine (read from each file at iii/v0.22.1). Every
 * file runs with a worker connected to the engine (iii's tests/setup.ts imports tests/utils.ts, which
 * connects `iii` to III_URL), but only some test the engine:
 * - http: tests that send requests to the engine's HTTP listener (III_HTTP_URL): http triggers and
 *   streaming bodies, http middleware, the health route.
 * - core: tests that drive the engine over the worker port (III_URL) or the RBAC listener
 *   (III_RBAC_WORKER_URL): engine:: functions, trigger types, channels, RBAC, HTTP-invoked functions.
 * - modules: iii's state, stream and pub/sub modules.
 * - sdk: every other file: the SDK against stand-ins (its own ws server, a mocked socket, no socket).
 * Left out: bridge*.test.ts, which need iii's two bridge engines (config-bridge*.yaml and its
 * `bridge` adapters, which Switchyard does not implement).
 */
export const GROUPS: Record<string, readonly string[]> = {
  http: ['api-triggers.test.ts', 'middleware.test.ts', 'healthcheck.test.ts'],
  core: [
    'data-channels.test.ts',
    'http-external-functions.test.ts',
    'rbac-workers.test.ts',
    'service-triggers.test.ts',
    'trigger-fault-tolerance.test.ts',
    'trigger-type-lifecycle.test.ts',
  ],
  modules: ['state.test.ts', 'stream.test.ts', 'pubsub.test.ts'],
  sdk: [
    'baggage-span-processor.test.ts',
    'channel-close-delay.test.ts',
    'channel-writer-readiness.test.ts',
    'connection-handshake-timeout.test.ts',
    'connection-heartbeat.test.ts',
    'connection-reattach.test.ts',
    'errors.test.ts',
    'exports.test.ts',
    'fetch-instrumentation.test.ts',
    'helpers.test.ts',
    'invoke-metadata.test.ts',
    'logger-runtime.test.ts',
    'logger.test.ts',
    'otel-defaults.test.ts',
    'otel-exception.test.ts',
    'otel-worker-gauges.test.ts',
    'payload.test.ts',
    'register-worker-metadata.test.ts',
    'span-ops.test.ts',
    'trigger-action.test.ts',
    'trigger-registration-error.test.ts',
    'worker-metrics.test.ts',
  ],
};

/** The listener ports config-test.yaml binds (the worker port, the RBAC listener, HTTP). */
const FIXTURE_PORTS = { workers: 49199, rbac: 49135, http: 3199 } as const;
const FIXTURE_STREAMS_PORT = 3112;

interface Options {
  iii: string;
  mode: 'embedded' | 'redis';
  processes: number;
  files: string[];
  runs: number;
  freePorts: boolean;
  install: boolean;
  standInAssets: boolean;
  keep: boolean;
  readyTimeoutMs: number;
}

function usage(message?: string): never {
  if (message !== undefined) console.error(`iii-suite: ${message}`);
  console.error(`Usage: npm run compat:iii-suite -- --iii PATH [options]

  --iii PATH         an iii checkout or extraction holding sdk/ (or $III_SOURCE)
  --mode M           embedded (default: one engine, --processes children)
                     redis (two engines in Redis mode, a redis-server of their own on a free port)
  --processes N      children per engine (default 2 embedded, 1 per node in redis mode)
  --group G[,G]      ${Object.keys(GROUPS).join(', ')} (default: http,core,sdk)
  --files F[,F]      test files of sdk/packages/node/iii/tests instead of groups
  --runs N           run the whole thing N times, a fresh engine each time (default 1)
  --free-ports       bind the fixture's listeners to free ports instead of 49199/49135/3199/3112
  --install          install iii's test dependencies first (npm, into a directory under $TMPDIR,
                     linked as sdk/packages/node/node_modules) and build its helpers package
  --stand-in-assets  when sdk/test-assets/handbook.pdf is missing (a snapshot without large files),
                     write a 5 MiB stand-in there (the tests only compare its bytes end to end)
  --keep             keep each run's directory (engine logs, config, vitest JSON)
  --ready-timeout S  seconds to wait for an engine's /readyz (default 60)`);
  process.exit(2);
}

function parseOptions(argv: readonly string[]): Options {
  const o: Options = {
    iii: process.env.III_SOURCE ?? '',
    mode: 'embedded',
    processes: 0,
    files: [],
    runs: 1,
    freePorts: false,
    install: false,
    standInAssets: false,
    keep: false,
    readyTimeoutMs: 60_000,
  };
  let groups = ['http', 'core', 'sdk'];
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i] as string;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined || v.startsWith('--')) usage(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case '--iii': o.iii = value(); break;
      case '--mode': {
        const m = value();
        if (m !== 'embedded' && m !== 'redis') usage('--mode is embedded or redis');
        o.mode = m;
        break;
      }
      case '--processes': o.processes = Number(value()); break;
      case '--group': groups = value().split(','); break;
      case '--files': o.files = value().split(','); break;
      case '--runs': o.runs = Number(value()); break;
      case '--free-ports': o.freePorts = true; break;
      case '--install': o.install = true; break;
      case '--stand-in-assets': o.standInAssets = true; break;
      case '--keep': o.keep = true; break;
      case '--ready-timeout': o.readyTimeoutMs = Number(value()) * 1000; break;
      case '--help': usage();
      // eslint-disable-next-line no-fallthrough
      default: usage(`unknown argument ${flag}`);
    }
  }
  if (o.iii === '') usage('say where iii is: --iii PATH or III_SOURCE');
  if (o.files.length === 0) {
    for (const g of groups) {
      const files = GROUPS[g];
      if (files === undefined) usage(`unknown group ${g}`);
      o.files.push(...files);
    }
  }
  if (o.processes === 0) o.processes = o.mode === 'embedded' ? 2 : 1;
  if (!Number.isInteger(o.processes) || o.processes < 1) usage('--processes is a whole number ≥ 1');
  if (!Number.isInteger(o.runs) || o.runs < 1) usage('--runs is a whole number ≥ 1');
  if (!(o.readyTimeoutMs > 0)) usage('--ready-timeout is a number of seconds');
  return o;
}

interface IiiPaths {
  nodeDir: string;
  pkgDir: string;
  testsDir: string;
  helpersDir: string;
  fixture: string;
  pdf: string;
}

function locateIii(path: string): IiiPaths {
  const root = resolve(path);
  const sdk = existsSync(join(root, 'sdk', 'packages')) ? join(root, 'sdk') : root;
  const nodeDir = join(sdk, 'packages', 'node');
  const paths = {
    nodeDir,
    pkgDir: join(nodeDir, 'iii'),
    testsDir: join(nodeDir, 'iii', 'tests'),
    helpersDir: join(nodeDir, 'helpers'),
    fixture: join(sdk, 'fixtures', 'config-test.yaml'),
    pdf: join(sdk, 'test-assets', 'handbook.pdf'),
  };
  for (const p of [paths.testsDir, paths.helpersDir, paths.fixture, join(paths.pkgDir, 'vitest.config.ts')]) {
    if (!existsSync(p)) usage(`${p} not found: is ${root} an iii checkout (or its sdk/)?`);
  }
  return paths;
}

const vitestBin = (p: IiiPaths): string => join(p.nodeDir, 'node_modules', '.bin', 'vitest');
const helpersBuilt = (p: IiiPaths): boolean => existsSync(join(p.helpersDir, 'dist', 'http'));

/**
 * iii's CI installs the pnpm workspace and builds @iii-dev/helpers before its tests. npm cannot read
 * pnpm's `workspace:*`, so the same dependencies (iii-sdk's and the helpers', at their declared ranges)
 * go into a directory of their own, linked where Node and vitest look for them from the tests, and
 * @iii-dev/helpers is linked to the checkout's own package, built with its own tsdown config.
 */
function installDependencies(p: IiiPaths): void {
  const depsDir = join(tmpdir(), 'switchyard-iii-suite-deps');
  mkdirSync(depsDir, { recursive: true });
  const wanted: Record<string, string> = {};
  for (const pkg of [join(p.pkgDir, 'package.json'), join(p.helpersDir, 'package.json')]) {
    const json = JSON.parse(readFileSync(pkg, 'utf8')) as Record<string, Record<string, string> | undefined>;
    for (const section of ['dependencies', 'devDependencies']) {
      for (const [name, range] of Object.entries(json[section] ?? {})) {
        // Coverage and API docs are not run here; workspace packages are linked below.
        if (range.startsWith('workspace:') || name === 'typedoc' || name === '@vitest/coverage-v8') continue;
        wanted[name] ??= range;
      }
    }
  }
  writeFileSync(join(depsDir, 'package.json'), JSON.stringify({ name: 'switchyard-iii-suite-deps', private: true, dependencies: wanted }, null, 2));
  console.log(`iii-suite: npm install in ${depsDir}: ${Object.keys(wanted).join(' ')}`);
  const npm = spawnSync('npm', ['install', '--no-audit', '--no-fund'], { cwd: depsDir, stdio: 'inherit' });
  if (npm.status !== 0) throw new Error('npm install failed');
  mkdirSync(join(depsDir, 'node_modules', '@iii-dev'), { recursive: true });
  const helpersLink = join(depsDir, 'node_modules', '@iii-dev', 'helpers');
  if (!existsSync(helpersLink)) symlinkSync(p.helpersDir, helpersLink, 'dir');
  const link = join(p.nodeDir, 'node_modules');
  if (!existsSync(link)) symlinkSync(join(depsDir, 'node_modules'), link, 'dir');
  console.log('iii-suite: building @iii-dev/helpers (tsdown)');
  const build = spawnSync(join(link, '.bin', 'tsdown'), [], { cwd: p.helpersDir, stdio: 'inherit' });
  if (build.status !== 0) throw new Error('building @iii-dev/helpers failed');
}

/**
 * api-triggers.test.ts streams sdk/test-assets/handbook.pdf up and down and compares the bytes (and
 * the multipart body's size) end to end, so any file of the kind will do: a PDF header, then 5 MiB of
 * deterministic bytes (snapshots that drop files of 4 MiB and more drop this one).
 */
function writeStandInPdf(path: string): void {
  const size = 5 * 1024 * 1024;
  const bytes = Buffer.alloc(size);
  let x = 0x9e3779b9;
  for (let i = 0; i < size; i++) {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
    bytes[i] = x & 0xff;
  }
  bytes.write('%PDF-1.4\n', 0, 'latin1');
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, bytes);
  console.log(`iii-suite: wrote a ${size} byte stand-in at ${path}`);
}

/** iii's file, byte for byte, then the Switchyard-only entries; node B's listeners moved when needed. */
function engineConfig(fixture: string, ports: Ports, extra: string): string {
  let text = fixture;
  for (const key of ['workers', 'rbac', 'http'] as const) {
    if (ports[key] === FIXTURE_PORTS[key]) continue;
    const re = new RegExp(`^(\\s*port:\\s*)${FIXTURE_PORTS[key]}\\s*$`, 'm');
    if (!re.test(text)) throw new Error(`config-test.yaml has no "port: ${FIXTURE_PORTS[key]}" line to move`);
    text = text.replace(re, `$1${ports[key]}`);
  }
  if (!text.endsWith('\n')) text += '\n';
  const out = `${text}\n  # Added by scripts/iii-suite.ts (Switchyard only)\n${extra}`;
  // The appended entries must land in iii's `workers:` list, after all of iii's own.
  const parsed = parseYaml(out) as { workers?: { name?: string }[] };
  const fixtureCount = (parseYaml(fixture) as { workers?: unknown[] }).workers?.length ?? 0;
  if (parsed.workers?.length !== fixtureCount + 2) throw new Error('appending to config-test.yaml did not extend its workers: list');
  return out;
}

interface Ports {
  workers: number;
  rbac: number;
  http: number;
  streams: number;
  admin: number;
}

async function portsFor(fixed: boolean): Promise<Ports> {
  return fixed
    ? { ...FIXTURE_PORTS, streams: FIXTURE_STREAMS_PORT, admin: await freePort() }
    : { workers: await freePort(), rbac: await freePort(), http: await freePort(), streams: await freePort(), admin: await freePort() };
}

async function portTaken(port: number): Promise<boolean> {
  return new Promise((done) => {
    const s = createConnection({ host: '127.0.0.1', port });
    s.once('connect', () => { s.destroy(); done(true); });
    s.once('error', () => done(false));
  });
}

interface Engine {
  name: string;
  ports: Ports;
  child: ChildProcess;
  log: string;
  stop(): Promise<void>;
}

async function startEngine(name: string, dir: string, config: string, ports: Ports, timeoutMs: number): Promise<Engine> {
  const work = join(dir, name);
  mkdirSync(work, { recursive: true });
  const configPath = join(work, 'config.yaml');
  writeFileSync(configPath, config);
  const log = join(work, 'engine.log');
  const out = createWriteStream(log);
  // cwd = the run's own directory: config-test.yaml's file_based stores (./data/…) start empty each run.
  const child = spawn(process.execPath, [ENGINE_BIN, '--config', configPath, '--log-level', process.env.LOG_LEVEL ?? 'info'], {
    cwd: work,
    env: { ...process.env, STREAMS_PORT: String(ports.streams), SWITCHYARD_LOG_FORMAT: 'json' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  child.stdout?.pipe(out, { end: false });
  child.stderr?.pipe(out, { end: false });
  const exited = once(child, 'exit');
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => { try { process.kill(-(child.pid as number), 'SIGKILL'); } catch { /* gone */ } }, 20_000);
      await exited;
      clearTimeout(timer);
    }
    out.end();
  };
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      out.end();
      throw new Error(`${name} exited before it was ready; log: ${log}\n${(await readFile(log, 'utf8').catch(() => '')).slice(-3000)}`);
    }
    try {
      const res = await fetch(`http://127.0.0.1:${ports.admin}/readyz`, { signal: AbortSignal.timeout(2000) });
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${name} not ready within ${timeoutMs / 1000} s; log: ${log}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { name, ports, child, log, stop };
}

interface FileResult {
  file: string;
  passed: number;
  total: number;
  failures: string[];
}

interface VitestJson {
  testResults?: {
    name: string;
    message?: string;
    assertionResults?: { status: string; fullName?: string; title: string; failureMessages?: string[] }[];
  }[];
}

function runVitest(p: IiiPaths, files: readonly string[], env: NodeJS.ProcessEnv, jsonPath: string, logPath: string): Promise<void> {
  const out = createWriteStream(logPath);
  // iii's own runner: its vitest, its vitest.config.ts (setup file, timeouts), the files as they are.
  const child = spawn(vitestBin(p), ['run', ...files.map((f) => `tests/${f}`), '--reporter=default', '--reporter=json', `--outputFile.json=${jsonPath}`], {
    cwd: p.pkgDir,
    env: { ...process.env, ...env, CI: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.pipe(out, { end: false });
  child.stderr?.pipe(out, { end: false });
  return new Promise((done) => child.on('exit', () => { out.end(); done(); }));
}

function readResults(files: readonly string[], jsonPath: string): FileResult[] {
  let json: VitestJson = {};
  try {
    json = JSON.parse(readFileSync(jsonPath, 'utf8')) as VitestJson;
  } catch {
    // vitest did not write it: every file counts as failed below
  }
  return files.map((file) => {
    const r = json.testResults?.find((t) => t.name.endsWith(`/tests/${file}`));
    const tests = r?.assertionResults ?? [];
    const failures = tests
      .filter((t) => t.status !== 'passed')
      .map((t) => `${t.fullName ?? t.title} [${t.status}]${t.failureMessages?.[0] ? `: ${t.failureMessages[0].split('\n')[0]}` : ''}`);
    if (r === undefined) failures.push('no result (vitest did not run the file)');
    else if (tests.length === 0) failures.push(`no tests ran: ${r.message?.split('\n')[0] ?? ''}`);
    return { file, passed: tests.filter((t) => t.status === 'passed').length, total: tests.length, failures };
  });
}

async function oneRun(o: Options, p: IiiPaths, fixture: string, run: number): Promise<FileResult[]> {
  const dir = await mkdtemp(join(tmpdir(), 'switchyard-iii-suite-'));
  const engines: Engine[] = [];
  let redis: RedisServer | undefined;
  try {
    if (o.mode === 'embedded') {
      const ports = await portsFor(!o.freePorts);
      if (!o.freePorts) {
        for (const port of [ports.workers, ports.rbac, ports.http, ports.streams]) {
          if (await portTaken(port)) throw new Error(`port ${port} (config-test.yaml) is in use: stop what holds it, or pass --free-ports`);
        }
      }
      const extra = [
        `  - name: switchyard-cluster`,
        `    config: { processes: ${o.processes} }`,
        `  - name: switchyard-admin`,
        `    config: { host: 127.0.0.1, port: ${ports.admin} }`,
        '',
      ].join('\n');
      engines.push(await startEngine('engine', dir, engineConfig(fixture, ports, extra), ports, o.readyTimeoutMs));
    } else {
      // Never the machine's Redis: a redis-server of the run's own, on a free port.
      redis = await startRedisServer();
      const secret = randomBytes(32).toString('hex');
      const name = `iii-suite-${randomBytes(3).toString('hex')}`;
      for (const node of ['node-a', 'node-b']) {
        // Node A keeps iii's ports (unless --free-ports); node B, on the same machine, cannot.
        const ports = await portsFor(node === 'node-a' && !o.freePorts);
        const extra = [
          `  - name: switchyard-cluster`,
          `    config: { processes: ${o.processes}, redis_url: "${redis.url}", secret: "${secret}", name: ${name}, node_id: ${node}, advertise_host: 127.0.0.1 }`,
          `  - name: switchyard-admin`,
          `    config: { host: 127.0.0.1, port: ${ports.admin} }`,
          '',
        ].join('\n');
        engines.push(await startEngine(node, dir, engineConfig(fixture, ports, extra), ports, o.readyTimeoutMs));
      }
    }
    const [a, b] = [engines[0] as Engine, engines[engines.length - 1] as Engine];
    // Redis mode: the tests' workers join node A, their HTTP requests and the RBAC listener's workers
    // go to node B, so every route, middleware and RBAC hook crosses nodes.
    const env = {
      III_URL: `ws://localhost:${a.ports.workers}`,
      III_HTTP_URL: `http://localhost:${b.ports.http}`,
      III_RBAC_WORKER_URL: `ws://localhost:${b.ports.rbac}`,
      // setup.ts also connects `bridgeIII` to iii's bridge engine (49197), which iii's CI starts and
      // this runner does not: pointed at Switchyard instead, it does not print reconnect errors into
      // tests that spy on console.error (trigger-registration-error.test.ts).
      III_BRIDGE_WS_URL: `ws://localhost:${b.ports.workers}`,
    };
    const jsonPath = join(dir, 'vitest.json');
    const logPath = join(dir, 'vitest.log');
    const started = Date.now();
    await runVitest(p, o.files, env, jsonPath, logPath);
    const results = readResults(o.files, jsonPath);
    const seconds = ((Date.now() - started) / 1000).toFixed(0);
    console.log(`\nrun ${run}/${o.runs}: ${describeSetup(o)}, ${seconds} s (vitest output: ${o.keep ? logPath : 'pass --keep to keep it'})`);
    for (const r of results) {
      console.log(`  ${r.passed === r.total && r.failures.length === 0 ? 'ok  ' : 'FAIL'} ${r.file.padEnd(40)} ${r.passed}/${r.total}`);
      for (const f of r.failures) console.log(`         - ${f}`);
    }
    return results;
  } finally {
    for (const e of engines.reverse()) await e.stop();
    if (redis !== undefined) await redis.stop();
    if (o.keep) console.log(`  kept ${dir}`);
    else await rm(dir, { recursive: true, force: true });
  }
}

function describeSetup(o: Options): string {
  return o.mode === 'embedded'
    ? `embedded, ${o.processes} process${o.processes === 1 ? '' : 'es'}`
    : `two Redis-mode nodes, ${o.processes} process${o.processes === 1 ? '' : 'es'} each`;
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const p = locateIii(o.iii);
  for (const f of o.files) if (!existsSync(join(p.testsDir, f))) usage(`${join(p.testsDir, f)} not found`);
  if (o.install) installDependencies(p);
  if (!existsSync(vitestBin(p)) || !helpersBuilt(p)) {
    usage(`iii's test dependencies are not installed in ${p.nodeDir} (or @iii-dev/helpers is not built): rerun with --install`);
  }
  if (o.files.includes('api-triggers.test.ts') && !existsSync(p.pdf)) {
    if (!o.standInAssets) usage(`${p.pdf} is missing (api-triggers.test.ts streams it): restore it, or pass --stand-in-assets`);
    writeStandInPdf(p.pdf);
  }
  if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) usage('dist/ is missing: npm run build');
  const fixture = readFileSync(p.fixture, 'utf8');
  const all: FileResult[][] = [];
  for (let run = 1; run <= o.runs; run++) all.push(await oneRun(o, p, fixture, run));
  console.log(`\nsummary (${describeSetup(o)}), pass/total per run:`);
  for (const [i, f] of o.files.entries()) {
    console.log(`  ${f.padEnd(40)} ${all.map((rs) => `${rs[i]?.passed}/${rs[i]?.total}`).join('  ')}`);
  }
  const sum = (rs: FileResult[], keep: (f: string) => boolean): string => {
    const mine = rs.filter((r) => keep(r.file));
    return `${mine.reduce((s, r) => s + r.passed, 0)}/${mine.reduce((s, r) => s + r.total, 0)}`;
  };
  for (const [group, files] of Object.entries(GROUPS)) {
    if (!files.some((f) => o.files.includes(f))) continue;
    console.log(`  ${`group ${group}`.padEnd(40)} ${all.map((rs) => sum(rs, (f) => files.includes(f))).join('  ')}`);
  }
  console.log(`  ${'all'.padEnd(40)} ${all.map((rs) => sum(rs, () => true)).join('  ')}`);
  const failed = all.some((rs) => rs.some((r) => r.failures.length > 0 || r.passed !== r.total));
  process.exit(failed ? 1 : 0);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.stack ?? err.message : err);
  process.exit(1);
});
