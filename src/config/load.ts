import { readFile } from 'node:fs/promises';
import { extname, resolve } from 'node:path';
import { parseDocument } from 'yaml';
import { ConfigError } from './config-error.js';
import type { ConfigIssue } from './config-error.js';
import { substituteEnv } from './env.js';
import { defaultConfig, parseConfig } from './parse-config.js';
import type { EngineConfig } from './types.js';

export { ConfigError } from './config-error.js';
export type { ConfigErrorCode, ConfigIssue } from './config-error.js';
export { defaultConfig, parseConfig } from './parse-config.js';

export type ConfigFormat = 'yaml' | 'json';
export type ConfigEnv = Record<string, string | undefined>;

/** Looked for in the working directory when no path is given; the first that exists is used. */
const DEFAULT_FILES = ['config.yaml', 'config.yml'] as const;

/**
 * Substitutes `${VAR}` references, parses YAML or JSON, and validates. `source` (a file path) only
 * makes error messages say where the problem is.
 */
export function loadConfigText(text: string, format: ConfigFormat, env: ConfigEnv, source?: string): EngineConfig {
  try {
    // Editors on Windows may save a BOM, which JSON.parse rejects and YAML would keep in the first key.
    const substituted = substituteEnv(text.replace(/^\uFEFF/, ''), env, format);
    const document = format === 'json' ? parseJson(substituted) : parseYaml(substituted);
    // An empty file (or one with only comments) is a valid "all defaults" config.
    return parseConfig(document ?? {});
  } catch (err) {
    if (err instanceof ConfigError && source !== undefined && err.source === undefined) {
      throw new ConfigError(err.code, err.issues, { source, cause: err.cause });
    }
    throw err;
  }
}

/**
 * Loads `path` (relative to `cwd`), or, when no path is given, `config.yaml` in `cwd` if it exists,
 * else the built-in defaults (`source` is then `'defaults'`). `.json` files are JSON, all else YAML.
 */
export async function loadConfigFile(
  path: string | undefined,
  env: ConfigEnv,
  cwd: string,
): Promise<{ config: EngineConfig; source: string }> {
  if (path === undefined) {
    for (const name of DEFAULT_FILES) {
      const candidate = resolve(cwd, name);
      const text = await readConfigFile(candidate, true);
      if (text !== undefined) return { config: loadConfigText(text, 'yaml', env, candidate), source: candidate };
    }
    return { config: defaultConfig(), source: 'defaults' };
  }
  const file = resolve(cwd, path);
  const text = await readConfigFile(file, false);
  return { config: loadConfigText(text, formatOf(file), env, file), source: file };
}

function formatOf(file: string): ConfigFormat {
  return extname(file).toLowerCase() === '.json' ? 'json' : 'yaml';
}

const READ_FAILURES: Record<string, string> = {
  ENOENT: 'file does not exist',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'is a directory, not a file',
};

async function readConfigFile(file: string, missingOk: true): Promise<string | undefined>;
async function readConfigFile(file: string, missingOk: false): Promise<string>;
async function readConfigFile(file: string, missingOk: boolean): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    const code = err instanceof Error && 'code' in err && typeof err.code === 'string' ? err.code : undefined;
    if (missingOk && code === 'ENOENT') return undefined;
    const reason = (code === undefined ? undefined : READ_FAILURES[code]) ?? (err instanceof Error ? err.message : String(err));
    throw new ConfigError('CONFIG_UNREADABLE', [{ path: file, message: reason }], { source: file, cause: err });
  }
}

function syntaxError(issues: ConfigIssue[]): ConfigError {
  return new ConfigError('CONFIG_INVALID', issues);
}

function parseYaml(text: string): unknown {
  const document = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (document.errors.length > 0) {
    throw syntaxError(
      document.errors.map((error) => {
        const position = error.linePos?.[0];
        return {
          path: position === undefined ? '(yaml)' : `line ${position.line}, column ${position.col}`,
          // Pretty messages repeat the position and add a source excerpt; the path already says where.
          message: `YAML syntax error: ${error.message.replace(/ at line \d+, column \d+:[\s\S]*$/, '')}`,
        };
      }),
    );
  }
  try {
    return document.toJS();
  } catch (err) {
    // Unresolved aliases and alias bombs surface only when the document is turned into values.
    throw new ConfigError('CONFIG_INVALID', [{ path: '(yaml)', message: err instanceof Error ? err.message : String(err) }], {
      cause: err,
    });
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    const raw = err instanceof Error ? err.message : String(err);
    const offset = /at position (\d+)/.exec(raw)?.[1];
    // Node 20 quotes the whole input in some messages; the file's content does not belong in an error.
    const message = raw
      .replace(/, ".*" is not valid JSON$/s, '')
      .replace(/ in JSON at position \d+.*$/s, '');
    const path = offset === undefined ? '(json)' : linePosition(text, Number(offset));
    throw new ConfigError('CONFIG_INVALID', [{ path, message: `JSON syntax error: ${message}` }], { cause: err });
  }
}

function linePosition(text: string, offset: number): string {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  const column = offset - before.lastIndexOf('\n');
  return `line ${line}, column ${column}`;
}
