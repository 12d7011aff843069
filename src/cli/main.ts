import { accessSync, constants, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import cluster from 'node:cluster';
import type { ChildBootstrap } from '../supervisor/child-messages.js';
import { CHILD_BOOTSTRAP_ENV } from '../supervisor/child-messages.js';
import { createRootLogger, isLogLevel } from '../observability/logger.js';
import { parseArgs, USAGE, UsageError } from './args.js';
import { watchNpmParent } from './parent-watch.js';

/** In-flight requests get this long to finish on shutdown. */
const DRAIN_GRACE_MS = 10_000;

/** The only place that touches argv, env, signals and the exit code. */
function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

async function main(): Promise<void> {
  let args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`switchyard: ${err.code}: ${err.message}\n\n${USAGE}`);
      process.exit(2);
    }
    throw err;
  }
  if (args.help) {
    process.stdout.write(USAGE);
    return;
  }
  if (args.version) {
    process.stdout.write(`${packageVersion()}\n`);
    return;
  }

  const envLevel = process.env.LOG_LEVEL;
  // SWITCHYARD_LOG_FORMAT=json|pretty overrides the choice: pretty on a terminal, JSON lines otherwise.
  const format = process.env.SWITCHYARD_LOG_FORMAT ?? (process.stdout.isTTY ? 'pretty' : 'json');
  const logger = createRootLogger(args.logLevel ?? (envLevel !== undefined && isLogLevel(envLevel) ? envLevel : 'info'), {
    format: format === 'pretty' ? 'pretty' : 'json',
    base: { pid: process.pid },
  });

  if (cluster.isWorker) {
    // A child: the primary validated the config and hands it over, so every child runs the same one.
    const bootstrap = JSON.parse(process.env[CHILD_BOOTSTRAP_ENV] ?? 'null') as ChildBootstrap | null;
    if (bootstrap === null) throw new Error(`${CHILD_BOOTSTRAP_ENV} is missing in a cluster child`);
    // Imported here, not at the top: a child never loads the config schemas (zod) or the primary's
    // code: 6-12 MB less RSS per child (docs/performance.md, "This round").
    const { runChild } = await import('./child.js');
    await runChild(bootstrap, logger.child({ role: 'child', index: bootstrap.index }));
    return;
  }

  const [{ ConfigError }, { loadConfigFile }, { Primary }, { exposedListeners }, { explainBindFailure }] = await Promise.all([
    import('../config/config-error.js'),
    import('../config/load.js'),
    import('../supervisor/primary.js'),
    import('../config/exposure.js'),
    import('../config/listener-keys.js'),
  ]);
  let loaded;
  try {
    loaded = await loadConfigFile(args.configPath, process.env, process.cwd());
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`switchyard: ${err.code}: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const { config, source } = loaded;
  // Files the children read at start: unreadable is a configuration error here, not a child crash loop.
  const tlsFiles: [string, string | undefined][] = [
    ['redis_tls_ca_file', config.cluster.redisTlsCaFile],
    ['forward_tls.cert_file', config.cluster.forwardTls?.certFile],
    ['forward_tls.key_file', config.cluster.forwardTls?.keyFile],
    ['forward_tls.ca_file', config.cluster.forwardTls?.caFile],
  ];
  for (const [key, file] of tlsFiles) {
    if (file === undefined) continue;
    try {
      accessSync(file, constants.R_OK);
    } catch {
      process.stderr.write(`switchyard: CONFIG_UNREADABLE: switchyard-cluster ${key} ${file} cannot be read\n`);
      process.exit(1);
    }
  }
  for (const exposed of exposedListeners(config)) {
    logger.warn({ listener: exposed.listener, host: exposed.host, port: exposed.port }, `${exposed.listener} listener reachable beyond loopback without authentication: ${exposed.risk}`);
  }
  for (const skipped of config.skippedModules) {
    logger.warn({ skippedModule: skipped }, `module ${skipped} is not implemented by switchyard; skipped (docs/compatibility.md)`);
  }

  const primaryLogger = logger.child({ role: 'primary' });
  let stopping = false;
  const primary = new Primary({
    config,
    logger: primaryLogger,
    configSource: source,
    drainGraceMs: DRAIN_GRACE_MS,
    execArgv: process.execArgv,
    mallocArenaMax: process.env.MALLOC_ARENA_MAX,
    pid: process.pid,
    onFatal: (code, message) => {
      process.stderr.write(`switchyard: ${code}: ${code === 'LISTEN_FAILED' ? explainBindFailure(config, message) : message}\n`);
      stopping = true;
      void primary.shutdown().finally(() => {
        logger.flush();
        process.exit(1);
      });
    },
  });
  const stop = (signal: NodeJS.Signals, why: Record<string, unknown> = {}): void => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    primaryLogger.info({ signal, ...why }, 'shutting down');
    const began = performance.now();
    primary
      .shutdown()
      .then(() => {
        primaryLogger.info({ durationMs: Math.round(performance.now() - began) }, 'stopped');
        logger.flush();
        process.exit(0);
      })
      .catch((err: unknown) => {
        primaryLogger.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // npm start: npm may exit on SIGTERM without passing it on; shut down as if it had.
  watchNpmParent((formerParent) => {
    if (!stopping) stop('SIGTERM', { reason: 'the npm script that started the engine exited', formerParent });
  });

  try {
    await primary.start();
    primaryLogger.info({ processes: config.cluster.processes, version: packageVersion() }, 'children starting');
  } catch (err) {
    const listen = err as NodeJS.ErrnoException & { address?: string; port?: number };
    if (listen.syscall === 'listen') {
      const message = `cannot bind ${listen.address ?? '?'}:${listen.port ?? '?'} (${listen.code ?? listen.message})`;
      process.stderr.write(`switchyard: LISTEN_FAILED: ${explainBindFailure(config, message)}\n`);
    }
    primaryLogger.fatal({ err }, 'startup failed');
    logger.flush();
    process.exit(1);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`switchyard: fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
