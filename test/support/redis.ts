import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { accessSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

/**
 * A real `redis-server` for integration tests, on a free loopback port, never the machine's own
 * Redis on 6379. Nothing is persisted (`--save "" --appendonly no`, working dir in a temp folder).
 * Talks to the server with raw RESP over `node:net`, so the harness does not depend on the client
 * library under test.
 */
export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<void>;
  /** SIGKILL, then waits for the exit. */
  kill(): Promise<void>;
  /** Stops (if running) and starts again on the same port with an empty data set. */
  restart(): Promise<void>;
  flushAll(): Promise<void>;
  /** Sends one command (raw RESP) and returns the first reply line. */
  command(...args: string[]): Promise<string>;
}

const START_TIMEOUT_MS = 5_000;
const STOP_TIMEOUT_MS = 5_000;
const MACHINE_REDIS_PORT = 6379;

const live = new Set<ChildProcess>();
const dirs = new Set<string>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function findRedisServer(): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, 'redis-server');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  throw new Error('redis-server is not on PATH: the Redis integration tests need a real Redis: run scripts/prerequisites.sh (README, Quick start)');
}

/**
 * Ports for test setups come from below the kernel's ephemeral range (/proc/sys/net/ipv4/
 * ip_local_port_range), where no process binding port 0 and no outgoing connection is given one: a
 * port picked by listening on 0 could be handed to another test's port-0 listener between the pick
 * and the engine's bind (seen: a tenant listener's bind failing with EADDRINUSE in CI). Each vitest
 * worker (VITEST_POOL_ID) takes its own slice, so two workers never pick the same port; any other
 * process a slice from its pid. Within a slice ports go round in turn, each checked free by a listen.
 */
const FIRST_TEST_PORT = 10_000;
const PORTS_PER_SLICE = 1_000;

function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > FIRST_TEST_PORT ? low : 32_768;
  } catch {
    return 32_768;
  }
}

const sliceFirst = ((): number => {
  const slices = Math.max(1, Math.floor((ephemeralLow() - FIRST_TEST_PORT) / PORTS_PER_SLICE));
  const pool = Number(process.env.VITEST_POOL_ID);
  // Pool ids are 1..maxWorkers; other processes share the slices above the first eight.
  const index = Number.isInteger(pool) && pool > 0 ? (pool - 1) % slices : slices > 8 ? 8 + (process.pid % (slices - 8)) : process.pid % slices;
  return FIRST_TEST_PORT + index * PORTS_PER_SLICE;
})();
let cursor = Math.floor(Math.random() * PORTS_PER_SLICE);

/** Whether nothing listens on 127.0.0.1:`port` (nor on every address) now. */
async function canListen(port: number): Promise<boolean> {
  const server = createServer();
  const listened = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => resolve(true));
  });
  if (listened) {
    server.close();
    await once(server, 'close');
  }
  return listened;
}

/** A port that was free a moment ago, from this process's slice below the ephemeral range. Never 6379. */
export async function freePort(): Promise<number> {
  for (let tried = 0; tried < PORTS_PER_SLICE; tried++) {
    const port = sliceFirst + (cursor++ % PORTS_PER_SLICE);
    if (port !== MACHINE_REDIS_PORT && (await canListen(port))) return port;
  }
  throw new Error(`no free port in ${sliceFirst}-${sliceFirst + PORTS_PER_SLICE - 1}`);
}

function encodeCommand(args: readonly string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
}

/** One command on a fresh connection; resolves with the first reply line (`+PONG`, `:1`, `-ERR …`). */
export function rawCommand(port: number, args: readonly string[], timeoutMs = 2_000): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let buffer = '';
    const timer = setTimeout(() => finish(new Error(`redis ${args[0] ?? ''} timed out after ${timeoutMs} ms`)), timeoutMs);
    const finish = (error: Error | undefined, line?: string): void => {
      clearTimeout(timer);
      socket.destroy();
      if (error !== undefined) reject(error);
      else resolve(line ?? '');
    };
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write(encodeCommand(args)));
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      const end = buffer.indexOf('\r\n');
      if (end >= 0) finish(undefined, buffer.slice(0, end));
    });
    socket.on('error', (error) => finish(error));
    socket.on('close', () => finish(new Error('connection closed before a reply')));
  });
}

async function waitForPing(port: number, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`redis-server on port ${port} exited during start-up:\n${output()}`);
    }
    try {
      if ((await rawCommand(port, ['PING'], 500)) === '+PONG') return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer PING within ${START_TIMEOUT_MS} ms:\n${output()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function waitForExit(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
    live.delete(child);
  }
}

export async function startRedisServer(): Promise<RedisServer> {
  const binary = findRedisServer();
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-redis-'));
  dirs.add(dir);
  let child: ChildProcess | undefined;
  let port = 0;

  const launch = async (): Promise<void> => {
    mkdirSync(dir, { recursive: true });
    dirs.add(dir);
    let log = '';
    const proc = spawn(binary, ['--save', '', '--appendonly', 'no', '--port', String(port), '--bind', '127.0.0.1', '--dir', dir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    live.add(proc);
    proc.on('exit', () => live.delete(proc));
    const collect = (chunk: Buffer): void => {
      log = (log + chunk.toString('utf8')).slice(-4_000);
    };
    proc.stdout?.on('data', collect);
    proc.stderr?.on('data', collect);
    child = proc;
    try {
      await waitForPing(port, proc, () => log);
    } catch (error) {
      await waitForExit(proc, 'SIGKILL');
      throw error;
    }
  };

  // The port may be taken between freePort() and the bind: try a few.
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    try {
      await launch();
      break;
    } catch (error) {
      if (attempt >= 3) throw error;
    }
  }

  const stop = async (signal: NodeJS.Signals): Promise<void> => {
    if (child !== undefined) await waitForExit(child, signal);
  };
  const stopAndClean = async (signal: NodeJS.Signals): Promise<void> => {
    await stop(signal);
    rmSync(dir, { recursive: true, force: true });
    dirs.delete(dir);
  };
  const server: RedisServer = {
    port,
    url: `redis://127.0.0.1:${port}`,
    stop: () => stopAndClean('SIGTERM'),
    kill: () => stopAndClean('SIGKILL'),
    restart: async () => {
      await stop('SIGTERM');
      await launch();
    },
    flushAll: async () => {
      const reply = await rawCommand(port, ['FLUSHALL']);
      if (reply !== '+OK') throw new Error(`FLUSHALL answered ${reply}`);
    },
    command: (...args) => rawCommand(port, args),
  };
  return server;
}

/**
 * A TCP proxy in front of Redis for one client, so a test can cut that client's link while Redis and
 * every other client stay up. While cut, open sockets are destroyed and new ones refused at once.
 */
export interface TcpProxy {
  readonly url: string;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let isCut = false;
  const server: Server = createServer((client) => {
    if (isCut) {
      client.destroy();
      return;
    }
    const upstream = createConnection({ host: '127.0.0.1', port: targetPort });
    sockets.add(client);
    sockets.add(upstream);
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('proxy has no port');
  return {
    url: `redis://127.0.0.1:${address.port}`,
    cut: () => {
      isCut = true;
      for (const socket of sockets) socket.destroy();
      sockets.clear();
    },
    restore: () => {
      isCut = false;
    },
    close: async () => {
      isCut = true;
      for (const socket of sockets) socket.destroy();
      sockets.clear();
      server.close();
      await once(server, 'close');
    },
  };
}
