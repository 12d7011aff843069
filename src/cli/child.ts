import type { Logger } from 'pino';
import type { IpcChannel } from '../bus/ipc-channel.js';
import { ChildEngine } from '../supervisor/child-engine.js';
import type { ChildBootstrap } from '../supervisor/child-messages.js';

/** The child's end of `node:cluster` IPC. */
function processChannel(): IpcChannel {
  return {
    send: (message) => {
      if (process.connected && process.send !== undefined) process.send(message);
    },
    onMessage: (listener) => {
      process.on('message', listener);
      return () => process.off('message', listener);
    },
  };
}

/**
 * A node:cluster child process: runs one engine, drains when the primary says so, and exits when the
 * primary is gone (no orphans). The engine and its reports to the primary are src/supervisor/child-engine.ts.
 */
export async function runChild(bootstrap: ChildBootstrap, rootLogger: Logger): Promise<void> {
  const channel = processChannel();
  const child = new ChildEngine(bootstrap, rootLogger, {
    channel,
    servedByHeader: process.env.SWITCHYARD_SERVED_BY_HEADER === '1',
    env: process.env,
    pid: process.pid,
    execArgv: process.execArgv,
  });
  const logger = child.log;
  let exiting = false;
  const exit = (code: number, why: string): void => {
    if (exiting) return;
    exiting = true;
    logger.info({ why }, 'child stopping');
    child
      .close()
      .catch((err: unknown) => logger.error({ err }, 'child close failed'))
      .finally(() => {
        logger.flush();
        process.exit(code);
      });
  };
  // The primary coordinates shutdown: a terminal's Ctrl-C reaches the whole process group.
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => exit(0, 'SIGTERM'));
  process.on('disconnect', () => exit(0, 'primary gone'));
  channel.onMessage((message) => {
    if (child.onPrimaryMessage(message) === 'shutdown') exit(0, 'primary asked to shut down');
  });
  if ((await child.start()) !== undefined) exit(1, 'start failed');
}
