import pino from 'pino';
import type { Logger, LevelWithSilent } from 'pino';
import pretty from 'pino-pretty';

export const LOG_LEVELS: readonly LevelWithSilent[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function isLogLevel(value: string): value is LevelWithSilent {
  return (LOG_LEVELS as readonly string[]).includes(value);
}

/**
 * The root logger: JSON lines on stdout (one object per line, `err` serialised with its cause and
 * code), or human-readable lines when stdout is a terminal. `SWITCHYARD_LOG_FORMAT=json|pretty`
 * overrides the choice.
 */
export function createRootLogger(level: LevelWithSilent, destination?: pino.DestinationStream): Logger {
  const options = { level, base: { pid: process.pid }, serializers: { err: pino.stdSerializers.err } };
  if (destination !== undefined) return pino(options, destination);
  const format = process.env.SWITCHYARD_LOG_FORMAT ?? (process.stdout.isTTY ? 'pretty' : 'json');
  if (format === 'pretty') {
    return pino(options, pretty({ colorize: true, singleLine: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' }));
  }
  return pino(options);
}
