import pino from 'pino';
import type { Logger, LevelWithSilent } from 'pino';
import pretty from 'pino-pretty';

export const LOG_LEVELS: readonly LevelWithSilent[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function isLogLevel(value: string): value is LevelWithSilent {
  return (LOG_LEVELS as readonly string[]).includes(value);
}

export type LogFormat = 'json' | 'pretty';

export interface RootLoggerOptions {
  /** JSON lines (the default), or human-readable lines for a terminal. */
  format?: LogFormat;
  /** Fields on every line (the CLI passes the pid). */
  base?: Record<string, unknown>;
  destination?: pino.DestinationStream;
}

/**
 * The root logger: JSON lines (one object per line, `err` serialised with its cause and code), or
 * human-readable lines. Which one, and the pid, are the CLI's to decide (src/cli/main.ts).
 */
export function createRootLogger(level: LevelWithSilent, options: RootLoggerOptions = {}): Logger {
  const pinoOptions = { level, base: options.base ?? {}, serializers: { err: pino.stdSerializers.err } };
  if (options.destination !== undefined) return pino(pinoOptions, options.destination);
  if (options.format === 'pretty') {
    return pino(pinoOptions, pretty({ colorize: true, singleLine: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' }));
  }
  return pino(pinoOptions);
}
