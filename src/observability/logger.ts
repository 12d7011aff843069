import pino from 'pino';
import type { Logger, LevelWithSilent } from 'pino';

export const LOG_LEVELS: readonly LevelWithSilent[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function isLogLevel(value: string): value is LevelWithSilent {
  return (LOG_LEVELS as readonly string[]).includes(value);
}

/** The root logger: JSON lines on stdout, `err` serialised with its cause and code. */
export function createRootLogger(level: LevelWithSilent, destination?: pino.DestinationStream): Logger {
  return pino({ level, base: { pid: process.pid }, serializers: { err: pino.stdSerializers.err } }, destination);
}
