import type { Logger } from 'pino';
import type { EngineFunction } from '../workers/engine-functions.js';
import { isPlainObject } from '../values.js';

const LEVELS = ['info', 'warn', 'error', 'debug', 'trace'] as const;

/** Longest message kept from a worker's log call; the rest is cut (a worker cannot flood the log line). */
const MAX_MESSAGE_CHARS = 4096;

/**
 * engine::log::{info,warn,error,debug,trace}: a worker writes a line into the engine's log, tagged
 * with its worker id (iii's names; part of the RBAC infrastructure carve-out). Input `{message, data?}`.
 */
export function logFunctions(logger: Logger): [string, EngineFunction][] {
  return LEVELS.map((level) => [
    `engine::log::${level}`,
    (input, caller) => {
      const record = isPlainObject(input) ? input : {};
      const text = typeof record.message === 'string' ? record.message : JSON.stringify(record.message ?? null);
      const message = text.length > MAX_MESSAGE_CHARS ? `${text.slice(0, MAX_MESSAGE_CHARS)}…` : text;
      logger[level]({ workerId: caller.id, ...(record.data === undefined ? {} : { data: record.data }) }, message);
      return { ok: true, value: null };
    },
  ]);
}
