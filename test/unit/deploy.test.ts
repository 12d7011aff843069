import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { ConfigError, loadConfigText } from '../../src/config/load.js';
import type { EngineConfig } from '../../src/config/types.js';
import type { Service } from '../support/compose.js';
import { mounts } from '../support/compose.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * Static checks of the deployment files (no Docker engine here): docker-compose.yml, the two
 * Dockerfiles, .dockerignore, deploy/switchyard.yaml (through the engine's own config loader) and
 * deploy/nginx.conf (parsed into directives). Cross-file facts are checked too: the config path the image
 * reads is the one compose mounts, the ports nginx proxies to are the ones the engine config binds.
 */

const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const exists = (path: string) => existsSync(join(ROOT, path));

// ─── helpers: docker-compose ──────────────────────────────────────────────────────────────────────────


/** `environment` as a map, whichever of the two compose forms (map or `KEY=value` list) is used. */
function environment(service: Service): Record<string, string> {
  const env = service.environment ?? {};
  if (Array.isArray(env)) {
    return Object.fromEntries(
      env.map((entry: string) => {
        const eq = entry.indexOf('=');
        return eq === -1 ? [entry, ''] : [entry.slice(0, eq), entry.slice(eq + 1)];
      }),
    );
  }
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)]));
}



/** `depends_on` as name → condition, from the list form (service_started) or the map form. */
function dependsOn(service: Service): Record<string, string> {
  const deps = service.depends_on ?? {};
  if (Array.isArray(deps)) return Object.fromEntries(deps.map((name: string) => [name, 'service_started']));
  return Object.fromEntries(Object.entries(deps).map(([name, v]: [string, any]) => [name, v?.condition ?? 'service_started']));
}

/** Published ports as "host:container" strings, from the short or the long form. */
function publishedPorts(service: Service): string[] {
  return (service.ports ?? []).map((p: any) => (typeof p === 'string' || typeof p === 'number' ? String(p) : `${p.published}:${p.target}`));
}

function healthcheckText(service: Service): string {
  const test = service.healthcheck?.test;
  return Array.isArray(test) ? test.join(' ') : String(test ?? '');
}

/** Compose durations ("20s", "1m30s") in seconds. */
function durationSeconds(value: string): number {
  let total = 0;
  for (const [, n, unit] of String(value).matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) {
    total += Number(n) * { ms: 0.001, s: 1, m: 60, h: 3600 }[unit as 'ms' | 's' | 'm' | 'h'];
  }
  return total;
}

// ─── helpers: Dockerfile ──────────────────────────────────────────────────────────────────────────────

interface Instruction {
  keyword: string;
  args: string;
}

/** Instructions of a Dockerfile: comments dropped, `\` continuations joined, keyword upper-cased. */
function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (pending !== '' && line.startsWith('#')) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      continue;
    }
    const full = (pending + line).trim();
    pending = '';
    const space = full.search(/\s/);
    out.push({ keyword: full.slice(0, space).toUpperCase(), args: full.slice(space + 1).trim() });
  }
  expect(pending, 'a continuation line runs off the end of the file').toBe('');
  return out;
}

/** The instructions of each stage (from one FROM to the next). */
function stages(instructions: Instruction[]): Instruction[][] {
  const result: Instruction[][] = [];
  for (const ins of instructions) {
    if (ins.keyword === 'FROM') result.push([]);
    result.at(-1)?.push(ins);
  }
  return result;
}

/** The exec (JSON array) form of CMD / ENTRYPOINT / HEALTHCHECK CMD; the shell form is refused. */
function execForm(args: string): string[] {
  const parsed: unknown = JSON.parse(args);
  expect(Array.isArray(parsed) && parsed.every((a) => typeof a === 'string'), `exec form expected: ${args}`).toBe(true);
  return parsed as string[];
}

/** Sources of the COPY instructions that copy from the build context (not --from another stage). */
function contextCopySources(instructions: Instruction[]): string[] {
  const sources: string[] = [];
  for (const ins of instructions) {
    if (ins.keyword !== 'COPY' && ins.keyword !== 'ADD') continue;
    const words = ins.args.split(/\s+/);
    if (words.some((w) => w.startsWith('--from='))) continue;
    const paths = words.filter((w) => !w.startsWith('--'));
    sources.push(...paths.slice(0, -1));
  }
  return sources;
}

/** .dockerignore rules (Go filepath.Match per segment, `**` for any depth, `!` re-includes; last match wins). */
function dockerignore(text: string): (path: string) => boolean {
  const rules = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!');
      const pattern = (negate ? l.slice(1) : l).replace(/^\/+|\/+$/g, '');
      const source = pattern
        .split('/')
        .map((seg) => (seg === '**' ? '(?:.*)' : seg.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')))
        .join('/')
        .replace(/\(\?:\.\*\)\//g, '(?:.*/)?');
      // A matching directory excludes everything under it.
      return { negate, re: new RegExp(`^${source}(?:/.*)?$`) };
    });
  return (path: string) => {
    let ignored = false;
    for (const rule of rules) if (rule.re.test(path)) ignored = !rule.negate;
    return ignored;
  };
}

// ─── helpers: nginx.conf ──────────────────────────────────────────────────────────────────────────────

interface Directive {
  name: string;
  args: string[];
  block?: Directive[];
  line: number;
}

/**
 * A small nginx config parser: words, quoted strings, `;`, `{`, `}`; `#` comments. Throws on unbalanced
 * braces, a directive without its `;`, or an unterminated string, with the line.
 */
function parseNginx(text: string): Directive[] {
  const tokens: { value: string; quoted: boolean; line: number }[] = [];
  let line = 1;
  for (let i = 0; i < text.length; ) {
    const c = text[i]!;
    if (c === '\n') {
      line++;
      i++;
    } else if (/\s/.test(c)) {
      i++;
    } else if (c === '#') {
      while (i < text.length && text[i] !== '\n') i++;
    } else if (c === '{' || c === '}' || c === ';') {
      tokens.push({ value: c, quoted: false, line });
      i++;
    } else if (c === '"' || c === "'") {
      let j = i + 1;
      let value = '';
      while (j < text.length && text[j] !== c) {
        if (text[j] === '\\' && j + 1 < text.length) j++;
        if (text[j] === '\n') line++;
        value += text[j];
        j++;
      }
      if (j >= text.length) throw new Error(`unterminated string starting at line ${line}`);
      tokens.push({ value, quoted: true, line });
      i = j + 1;
    } else {
      let j = i;
      while (j < text.length && !/[\s;{}#]/.test(text[j]!)) j++;
      tokens.push({ value: text.slice(i, j), quoted: false, line });
      i = j;
    }
  }
  let pos = 0;
  const block = (depth: number): Directive[] => {
    const out: Directive[] = [];
    for (;;) {
      const t = tokens[pos];
      if (t === undefined) {
        if (depth > 0) throw new Error('unbalanced braces: a block is not closed at the end of the file');
        return out;
      }
      if (!t.quoted && t.value === '}') {
        if (depth === 0) throw new Error(`unbalanced braces: unexpected } at line ${t.line}`);
        pos++;
        return out;
      }
      if (!t.quoted && (t.value === '{' || t.value === ';')) throw new Error(`unexpected ${t.value} at line ${t.line}`);
      const directive: Directive = { name: t.value, args: [], line: t.line };
      pos++;
      for (;;) {
        const a = tokens[pos];
        if (a === undefined) throw new Error(`directive ${directive.name} (line ${directive.line}) has no ; or {`);
        pos++;
        if (!a.quoted && a.value === ';') break;
        if (!a.quoted && a.value === '{') {
          directive.block = block(depth + 1);
          break;
        }
        if (!a.quoted && a.value === '}') throw new Error(`directive ${directive.name} (line ${directive.line}) has no ;`);
        directive.args.push(a.value);
      }
      out.push(directive);
    }
  };
  return block(0);
}

const all = (list: Directive[] | undefined, name: string) => (list ?? []).filter((d) => d.name === name);
function one(list: Directive[] | undefined, name: string): Directive {
  const found = all(list, name);
  expect(found.map((d) => d.name), `exactly one ${name}`).toStrictEqual([name]);
  return found[0]!;
}
/** Every directive in a subtree, depth first. */
function walk(list: Directive[] | undefined): Directive[] {
  return (list ?? []).flatMap((d) => [d, ...walk(d.block)]);
}
/** nginx time values ("35s", "1h", "500ms", a bare number = seconds) in seconds. */
function nginxSeconds(value: string): number {
  const m = /^(\d+)(ms|s|m|h|d)?$/.exec(value);
  if (m === null) throw new Error(`not an nginx time: ${value}`);
  return Number(m[1]) * { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h' | 'd'];
}
const headerSet = (list: Directive[]) =>
  Object.fromEntries(all(list, 'proxy_set_header').map((d) => [d.args[0]!.toLowerCase(), d.args[1] ?? '']));

// ─── the files ────────────────────────────────────────────────────────────────────────────────────────

const compose = parseYaml(read('docker-compose.yml')) as { services: Record<string, Service>; [key: string]: unknown };
const services = compose.services;
const engineDockerfile = parseDockerfile(read('Dockerfile'));
const workerDockerfile = parseDockerfile(read('deploy/worker.Dockerfile'));
const ignored = dockerignore(read('.dockerignore'));
const switchyardYaml = read('deploy/switchyard.yaml');
const engineEnv = environment(services.engine ?? {});

/** The env the engine container gets, with compose's `${VAR:-default}` interpolated from an empty shell. */
function containerEnv(service: Service): Record<string, string> {
  return Object.fromEntries(
    Object.entries(environment(service)).map(([k, v]) => [k, v.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}/g, (_m, _name, def: string | undefined) => def ?? '')]),
  );
}

const cmdOf = (instructions: Instruction[]) => execForm(instructions.filter((i) => i.keyword === 'CMD').at(-1)!.args);
const CONFIG_PATH = (() => {
  const cmd = cmdOf(engineDockerfile);
  return cmd[cmd.indexOf('--config') + 1];
})();

describe('docker-compose.yml', () => {
  it('uses the compose spec (no version key) and defines redis, engine, lb, worker, prometheus and grafana', () => {
    expect(compose).not.toHaveProperty('version');
    expect(Object.keys(services).sort()).toStrictEqual(['engine', 'grafana', 'lb', 'prometheus', 'redis', 'worker']);
  });

  it('redis: redis 7, no persistence, healthchecked with redis-cli ping', () => {
    const redis = services.redis!;
    expect(redis.image).toMatch(/^redis:7(\.|-|$)/);
    const command = Array.isArray(redis.command) ? redis.command : String(redis.command).split(/\s+/);
    const save = command.indexOf('--save');
    expect(save).toBeGreaterThanOrEqual(0);
    expect(['', '""', "''"]).toContain(command[save + 1]);
    expect(command[command.indexOf('--appendonly') + 1]).toBe('no');
    expect(healthcheckText(redis)).toMatch(/redis-cli\s+ping/);
    expect(redis.ports).toBeUndefined();
  });

  it('engine: built from the root Dockerfile, several replicas, init, after a healthy redis', () => {
    const engine = services.engine!;
    const build = typeof engine.build === 'string' ? { context: engine.build } : engine.build;
    expect(build.context).toBe('.');
    expect(build.dockerfile ?? 'Dockerfile').toBe('Dockerfile');
    expect(engine.deploy.replicas).toBeGreaterThanOrEqual(2);
    expect(engine.init).toBe(true);
    expect(engine.container_name, 'a fixed container name forbids replicas').toBeUndefined();
    expect(dependsOn(engine)).toStrictEqual({ redis: 'service_healthy' });
  });

  it('engine: Redis mode through the environment; the cluster secret is overridable', () => {
    expect(engineEnv.REDIS_URL).toBe('redis://redis:6379');
    expect(engineEnv.CLUSTER_SECRET).toMatch(/^\$\{CLUSTER_SECRET:-[^}]+\}$/);
  });

  it('engine: the config is mounted read-only where the image CMD reads it, from deploy/switchyard.yaml', () => {
    expect(CONFIG_PATH).toBe('/etc/switchyard/config.yaml');
    const config = mounts(services.engine!).filter((m) => m.target === CONFIG_PATH);
    expect(config).toHaveLength(1);
    expect(config[0]).toStrictEqual({ source: './deploy/switchyard.yaml', target: CONFIG_PATH, readOnly: true });
  });

  it('engine: no published ports (traffic comes through lb), healthchecked on /readyz, a stop grace above the drain', () => {
    const engine = services.engine!;
    expect(engine.ports).toBeUndefined();
    expect(healthcheckText(engine)).toContain('http://127.0.0.1:9464/readyz');
    // Drain grace 10 s + 5 s before the engine kills leftovers.
    expect(durationSeconds(engine.stop_grace_period)).toBeGreaterThan(15);
  });

  it('engine: every environment reference in deploy/switchyard.yaml without a default is provided', () => {
    const references = [...switchyardYaml.matchAll(/\$\{([^{}:\s]+)(:[^}]*)?\}/g)];
    expect(references.length).toBeGreaterThan(0);
    const required = references.filter((m) => m[2] === undefined).map((m) => m[1]);
    for (const name of required) expect(Object.keys(engineEnv), `${name} is not set for the engine`).toContain(name);
  });

  it('lb: nginx with deploy/nginx.conf, publishing 3111 and 49134, after the engine replicas are healthy', () => {
    const lb = services.lb!;
    expect(lb.image).toMatch(/^nginx:1\.\d+/);
    const conf = mounts(lb).find((m) => m.target === '/etc/nginx/nginx.conf');
    expect(conf).toMatchObject({ source: './deploy/nginx.conf', readOnly: true });
    expect(exists('deploy/nginx.conf')).toBe(true);
    const ports = publishedPorts(lb);
    expect(ports).toContain('3111:3111');
    expect(ports).toContain('49134:49134');
    expect(dependsOn(lb)).toStrictEqual({ engine: 'service_healthy' });
  });

  it('worker: the example replicated worker image, several replicas, connected through the LB', () => {
    const worker = services.worker!;
    expect(worker.build).toMatchObject({ context: '.', dockerfile: 'deploy/worker.Dockerfile' });
    expect(worker.deploy.replicas).toBeGreaterThanOrEqual(2);
    expect(worker.container_name).toBeUndefined();
    expect(environment(worker).III_URL).toBe('ws://lb:49134');
    expect(Object.keys(dependsOn(worker))).toContain('lb');
    expect(cmdOf(workerDockerfile).join(' ')).toContain('replicated-worker.mjs');
  });

  it('every bind-mount source and build context exists in the repository', () => {
    for (const [name, service] of Object.entries(services)) {
      for (const m of mounts(service)) {
        if (!m.source.startsWith('.')) continue;
        expect(exists(m.source), `${name}: ${m.source}`).toBe(true);
        expect(statSync(join(ROOT, m.source)).isFile(), `${name}: ${m.source} is a file`).toBe(true);
      }
      if (service.build !== undefined) {
        const build = typeof service.build === 'string' ? { context: service.build } : service.build;
        expect(exists(join(build.context, build.dockerfile ?? 'Dockerfile')), `${name}: Dockerfile`).toBe(true);
      }
    }
  });
});

describe('deploy/switchyard.yaml through the engine config loader', () => {
  const env = { REDIS_URL: 'redis://redis:6379', CLUSTER_SECRET: 'test-secret-0123' };

  it('is valid and configures Redis mode, public listeners and admin on 0.0.0.0', () => {
    const config = loadConfigText(switchyardYaml, 'yaml', env, 'deploy/switchyard.yaml');
    expect(config.skippedModules).toStrictEqual([]);
    expect(config.api).toMatchObject({ host: '0.0.0.0', port: 3111, defaultTimeoutMs: 30000 });
    expect(config.workers).toMatchObject({ host: '0.0.0.0', port: 49134 });
    expect(config.admin).toStrictEqual({ host: '0.0.0.0', port: 9464 });
    expect(config.cluster).toMatchObject({
      redisUrl: 'redis://redis:6379',
      secret: 'test-secret-0123',
      name: 'switchyard',
      processes: 2,
    });
    expect(config.cluster.leaseMs).toBeGreaterThan(config.cluster.heartbeatMs);
    // Left to the engine's default: the container's own address.
    expect(config.cluster.advertiseHost).toBeUndefined();
  });

  it('loads with exactly the environment compose gives the engine container', () => {
    const config = loadConfigText(switchyardYaml, 'yaml', containerEnv(services.engine!), 'deploy/switchyard.yaml');
    expect(config.cluster.redisUrl).toBe('redis://redis:6379');
    expect(config.cluster.secret).toBe(containerEnv(services.engine!).CLUSTER_SECRET);
    expect(config.cluster.processes).toBe(Number(containerEnv(services.engine!).SWITCHYARD_PROCESSES ?? 2));
  });

  it('takes the process count and the cluster name from the environment', () => {
    const config = loadConfigText(switchyardYaml, 'yaml', { ...env, SWITCHYARD_PROCESSES: '4', CLUSTER_NAME: 'blue' });
    expect(config.cluster.processes).toBe(4);
    expect(config.cluster.name).toBe('blue');
  });

  it('refuses to start without REDIS_URL or CLUSTER_SECRET, naming the variable', () => {
    for (const missing of ['REDIS_URL', 'CLUSTER_SECRET'] as const) {
      const partial: Record<string, string> = { ...env };
      delete partial[missing];
      let error: unknown;
      try {
        loadConfigText(switchyardYaml, 'yaml', partial);
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).issues.map((i) => i.message).join('\n')).toContain(missing);
    }
  });
});

describe('Dockerfile (engine)', () => {
  const from = engineDockerfile.filter((i) => i.keyword === 'FROM');
  const runtime = stages(engineDockerfile).at(-1)!;

  it('is multi-stage on node:20-bookworm-slim', () => {
    expect(from.length).toBeGreaterThanOrEqual(2);
    for (const f of from) expect(f.args).toMatch(/^node:20-bookworm-slim(\s|$)/);
  });

  it('builds with npm ci (prepare compiles) then prunes dev dependencies', () => {
    const runs = engineDockerfile.filter((i) => i.keyword === 'RUN').map((i) => i.args).join('\n');
    expect(runs).toMatch(/npm ci\b/);
    expect(runs).toMatch(/npm prune --omit=dev/);
    // The runtime stage copies the build output and production modules from the builder.
    const fromBuilder = runtime.filter((i) => i.keyword === 'COPY' && i.args.includes('--from=')).map((i) => i.args);
    for (const path of ['dist', 'node_modules', 'package.json']) {
      expect(fromBuilder.some((a) => a.includes(`/app/${path}`)), path).toBe(true);
    }
  });

  it('runs as the non-root node user under tini', () => {
    const users = runtime.filter((i) => i.keyword === 'USER');
    expect(users.at(-1)?.args).toBe('node');
    expect(runtime.some((i) => i.keyword === 'RUN' && /apt-get install[^&]*\btini\b/.test(i.args))).toBe(true);
    const entrypoint = execForm(runtime.find((i) => i.keyword === 'ENTRYPOINT')!.args);
    expect(entrypoint[0]).toBe('/usr/bin/tini');
    expect(entrypoint.at(-1)).toBe('--');
  });

  it('starts the engine with the config path compose mounts, exposes its ports', () => {
    expect(cmdOf(engineDockerfile)).toStrictEqual(['node', 'bin/switchyard.js', '--config', '/etc/switchyard/config.yaml']);
    const exposed = runtime.filter((i) => i.keyword === 'EXPOSE').flatMap((i) => i.args.split(/\s+/));
    expect(exposed.sort()).toStrictEqual(['3111', '49134', '9464']);
  });

  it('its healthcheck asks the admin listener /readyz', () => {
    const health = runtime.find((i) => i.keyword === 'HEALTHCHECK');
    expect(health).toBeDefined();
    const cmd = execForm(health!.args.slice(health!.args.indexOf('CMD ') + 4));
    expect(cmd[0]).toBe('node');
    expect(cmd.join(' ')).toContain('http://127.0.0.1:9464/readyz');
  });

  it('copies from the build context only what exists and .dockerignore lets through', () => {
    const sources = contextCopySources(engineDockerfile);
    expect(sources).toEqual(expect.arrayContaining(['package.json', 'package-lock.json', 'src', 'bin']));
    for (const source of sources) {
      expect(exists(source), source).toBe(true);
      expect(ignored(source), `${source} is excluded by .dockerignore`).toBe(false);
    }
  });
});

describe('deploy/worker.Dockerfile (example worker)', () => {
  const from = workerDockerfile.filter((i) => i.keyword === 'FROM');
  const runtime = stages(workerDockerfile).at(-1)!;

  it('is built on node:20-bookworm-slim, runs as node under tini', () => {
    expect(from.length).toBeGreaterThanOrEqual(1);
    for (const f of from) expect(f.args).toMatch(/^node:20-bookworm-slim(\s|$)/);
    expect(runtime.filter((i) => i.keyword === 'USER').at(-1)?.args).toBe('node');
    expect(execForm(runtime.find((i) => i.keyword === 'ENTRYPOINT')!.args)[0]).toBe('/usr/bin/tini');
  });

  it('installs the pinned iii-sdk from examples/package.json and its lock file', () => {
    const pkg = JSON.parse(read('examples/package.json'));
    expect(pkg.dependencies['iii-sdk']).toBe('0.22.1');
    const lock = JSON.parse(read('examples/package-lock.json'));
    expect(lock.packages['node_modules/iii-sdk'].version).toBe('0.22.1');
    expect(workerDockerfile.some((i) => i.keyword === 'RUN' && /npm ci\b.*--omit=dev/.test(i.args))).toBe(true);
  });

  it('copies from the context only what exists and .dockerignore lets through; runs a copied script', () => {
    const sources = contextCopySources(workerDockerfile);
    for (const source of sources) {
      expect(exists(source), source).toBe(true);
      expect(ignored(source), `${source} is excluded by .dockerignore`).toBe(false);
    }
    const script = cmdOf(workerDockerfile).find((a) => a.endsWith('.mjs'))!;
    expect(sources).toContain(`examples/${script}`);
  });
});

describe('.dockerignore', () => {
  it('keeps host artefacts and tests out of the context', () => {
    for (const path of ['node_modules', 'node_modules/ws/index.js', 'examples/node_modules/x', 'dist/cli/main.js', '.git/HEAD', 'test/unit/deploy.test.ts', 'bench/cluster.ts', 'coverage/index.html', '.env']) {
      expect(ignored(path), path).toBe(true);
    }
    for (const path of ['src/engine.ts', 'bin/switchyard.js', 'package.json', 'examples/hello-worker.mjs']) {
      expect(ignored(path), path).toBe(false);
    }
  });
});

describe('deploy/nginx.conf', () => {
  // Parsed in beforeAll, so a file that does not parse fails each check here with the parser's reason.
  let nginx: Directive[];
  let http: Directive[];
  let upstreams: Map<string, Directive[]>;
  let servers: Directive[][];
  let config: EngineConfig;
  beforeAll(() => {
    nginx = parseNginx(read('deploy/nginx.conf'));
    http = one(nginx, 'http').block!;
    upstreams = new Map(all(http, 'upstream').map((u) => [u.args[0]!, u.block!]));
    servers = all(http, 'server').map((s) => s.block!);
    config = loadConfigText(switchyardYaml, 'yaml', { REDIS_URL: 'redis://r', CLUSTER_SECRET: 's' });
  });
  const serverOn = (port: number) => {
    const found = servers.filter((s) => all(s, 'listen').some((l) => l.args[0] === String(port) || l.args[0]!.endsWith(`:${port}`)));
    expect(found, `one server listening on ${port}`).toHaveLength(1);
    return found[0]!;
  };
  const location = (server: Directive[]) => one(server, 'location').block!;

  it('the parser refuses unbalanced braces and missing semicolons (so the checks below mean something)', () => {
    expect(() => parseNginx('events {}\nhttp { server { listen 1; }')).toThrow(/unbalanced/);
    expect(() => parseNginx('http { } }')).toThrow(/unbalanced/);
    expect(() => parseNginx('http { listen 1 }')).toThrow(/no ;/);
    expect(parseNginx('a "x;y" {b 1;} # c {')).toStrictEqual([{ name: 'a', args: ['x;y'], line: 1, block: [{ name: 'b', args: ['1'], line: 1 }] }]);
  });

  it('is a complete nginx.conf: events and http blocks', () => {
    expect(one(nginx, 'events').block).toBeDefined();
    expect(servers).toHaveLength(2);
  });

  it('uses Docker\'s DNS resolver', () => {
    expect(one(http, 'resolver').args[0]).toBe('127.0.0.11');
  });

  it('every proxy_pass names an upstream that exists, whose servers are compose services on the engine\'s ports', () => {
    const passes = walk(http).filter((d) => d.name === 'proxy_pass');
    expect(passes.length).toBe(2);
    const targets = new Set<string>();
    for (const pass of passes) {
      const name = /^http:\/\/([^/:$]+)$/.exec(pass.args[0]!)?.[1];
      expect(name, `proxy_pass ${pass.args[0]} (line ${pass.line}) names an upstream`).toBeDefined();
      expect([...upstreams.keys()]).toContain(name);
      for (const server of all(upstreams.get(name!), 'server')) targets.add(server.args[0]!);
    }
    expect([...targets].sort()).toStrictEqual([`engine:${config.api.port}`, `engine:${config.workers.port}`].sort());
    for (const target of targets) expect(Object.keys(services)).toContain(target.split(':')[0]);
  });

  it('listens on 3111 and 49134, the ports compose publishes', () => {
    const listened = servers.flatMap((s) => all(s, 'listen').map((l) => l.args[0]));
    expect(listened.sort()).toStrictEqual(['3111', '49134']);
    for (const port of listened) expect(publishedPorts(services.lb!)).toContain(`${port}:${port}`);
  });

  it(':3111 proxies HTTP with keep-alive upstream connections, client headers, retries on connection errors only', () => {
    const loc = location(serverOn(3111));
    const upstream = upstreams.get(one(loc, 'proxy_pass').args[0]!.replace('http://', ''))!;
    expect(Number(one(upstream, 'keepalive').args[0])).toBeGreaterThan(0);
    // Reused connections must be closed by nginx before the engine's 5 s keep-alive timeout closes them.
    expect(nginxSeconds(one(upstream, 'keepalive_timeout').args[0]!)).toBeLessThan(5);
    expect(one(loc, 'proxy_http_version').args).toStrictEqual(['1.1']);
    const headers = headerSet(loc);
    expect(headers.connection).toBe('');
    expect(headers['x-forwarded-for']).toMatch(/^\$(remote_addr|proxy_add_x_forwarded_for)$/);
    expect(headers['x-real-ip']).toBe('$remote_addr');
    expect(headers['x-request-id']).toMatch(/^\$/);
    expect(one(loc, 'proxy_next_upstream').args).toStrictEqual(['error']);
    // Above the engine's own request deadline, so the engine answers its own 504.
    const deadline = config.api.defaultTimeoutMs / 1000;
    expect(nginxSeconds(one(loc, 'proxy_read_timeout').args[0]!)).toBeGreaterThan(deadline);
    expect(nginxSeconds(one(loc, 'proxy_send_timeout').args[0]!)).toBeGreaterThan(deadline);
  });

  it(':3111 forwards the request id nginx logs: the client\'s, or nginx\'s own', () => {
    const rid = headerSet(location(serverOn(3111)))['x-request-id']!;
    const map = all(http, 'map').find((m) => m.args[1] === rid);
    expect(map?.args[0]).toBe('$http_x_request_id');
    expect(Object.fromEntries(map!.block!.map((d) => [d.name, d.args[0]]))).toStrictEqual({ default: '$http_x_request_id', '': '$request_id' });
  });

  it(':49134 passes the WebSocket upgrade and the Authorization header through, with long timeouts', () => {
    const loc = location(serverOn(49134));
    expect(one(loc, 'proxy_http_version').args).toStrictEqual(['1.1']);
    const headers = headerSet(loc);
    expect(headers.upgrade).toBe('$http_upgrade');
    expect(headers.authorization).toBe('$http_authorization');
    const connection = headers.connection!;
    const map = all(http, 'map').find((m) => m.args[0] === '$http_upgrade' && m.args[1] === connection);
    expect(map, `map $http_upgrade ${connection}`).toBeDefined();
    expect(Object.fromEntries(map!.block!.map((d) => [d.name, d.args[0]]))).toStrictEqual({ default: 'upgrade', '': 'close' });
    // The SDK pings every 20 s; sockets live far longer than any HTTP request.
    expect(nginxSeconds(one(loc, 'proxy_read_timeout').args[0]!)).toBeGreaterThanOrEqual(60);
    expect(nginxSeconds(one(loc, 'proxy_send_timeout').args[0]!)).toBeGreaterThanOrEqual(60);
  });
});

describe('deploy/kubernetes.md manifests', () => {
  // The note's YAML blocks, parsed: the config it proposes must load, and the numbers must agree.
  const docs = [...read('deploy/kubernetes.md').matchAll(/```yaml\n([\s\S]*?)```/g)].flatMap((m) =>
    parseAllDocuments(m[1]!).map((d) => d.toJS() as Record<string, any>),
  );
  const kind = (k: string, name: string) => docs.find((d) => d.kind === k && d.metadata?.name === name);
  const deployment = kind('Deployment', 'switchyard');
  const engine = deployment?.spec.template.spec.containers[0];

  it('holds the ConfigMap, Secret, engine Deployment, both Services and the worker Deployment', () => {
    expect(kind('ConfigMap', 'switchyard-config')).toBeDefined();
    expect(kind('Secret', 'switchyard-cluster')).toBeDefined();
    expect(deployment?.spec.replicas).toBeGreaterThanOrEqual(2);
    expect(kind('Service', 'switchyard-http')?.spec.ports[0].port).toBe(3111);
    expect(kind('Service', 'switchyard-workers')?.spec.ports[0].port).toBe(49134);
    const worker = kind('Deployment', 'example-worker')?.spec.template.spec.containers[0];
    expect(worker.env).toContainEqual({ name: 'III_URL', value: 'ws://switchyard-workers:49134' });
  });

  it('its config loads with the pod IP as advertise_host, admin on 0.0.0.0, a fixed forward_port', () => {
    const text = kind('ConfigMap', 'switchyard-config')!.data['config.yaml'];
    const config = loadConfigText(text, 'yaml', { REDIS_URL: 'redis://redis:6379', CLUSTER_SECRET: 's3', POD_IP: '10.1.2.3' });
    expect(config.admin.host).toBe('0.0.0.0');
    expect(config.cluster).toMatchObject({ redisUrl: 'redis://redis:6379', secret: 's3', advertiseHost: '10.1.2.3' });
    expect(config.cluster.forwardPort).toBeGreaterThan(0);
    // POD_IP comes from the downward API; the other references from the Deployment's env.
    const env = engine.env as { name: string; value?: string; valueFrom?: any }[];
    expect(env.find((e) => e.name === 'POD_IP')?.valueFrom).toStrictEqual({ fieldRef: { fieldPath: 'status.podIP' } });
    expect(env.find((e) => e.name === 'CLUSTER_SECRET')?.valueFrom.secretKeyRef.name).toBe('switchyard-cluster');
    for (const [, name] of text.matchAll(/\$\{([^{}:\s]+)\}/g)) expect(env.map((e) => e.name)).toContain(name);
    // Every process's forward port is declared on the container.
    const ports = (engine.ports as { containerPort: number }[]).map((p) => p.containerPort);
    for (let i = 0; i < config.cluster.processes; i++) expect(ports).toContain(config.cluster.forwardPort! + i);
    for (const port of [config.api.port, config.workers.port, config.admin.port]) expect(ports).toContain(port);
  });

  it('probes /readyz and /healthz on the admin port; the grace period covers preStop, drain and kill', () => {
    const admin = (engine.ports as { name: string; containerPort: number }[]).find((p) => p.name === engine.readinessProbe.httpGet.port);
    expect(admin?.containerPort).toBe(9464);
    expect(engine.readinessProbe.httpGet.path).toBe('/readyz');
    expect(engine.livenessProbe.httpGet.path).toBe('/healthz');
    const preStop = Number(engine.lifecycle?.preStop?.exec?.command?.at(-1) ?? 0);
    expect(deployment!.spec.template.spec.terminationGracePeriodSeconds).toBeGreaterThan(preStop + 10 + 5);
    expect(engine.volumeMounts[0].mountPath).toBe(CONFIG_PATH!.slice(0, CONFIG_PATH!.lastIndexOf('/')));
  });
});
