import { ConfigError } from './config-error.js';
import type { ConfigIssue } from './config-error.js';

/**
 * `${VAR}` and `${VAR:default}`, iii's syntax. The name excludes `:` and `}` as iii's does, so a file
 * that iii accepts substitutes the same way here. Anything else containing `$` is left alone.
 */
const REFERENCE = /\$\{([^{}:\s]+)(?::([^}]*))?\}/g;

/**
 * Substitutes environment references in the raw file text, before parsing, so `port: ${PORT:3111}`
 * parses as a number. A variable that is set wins even when empty (iii behaves the same); the default
 * applies only when it is unset. Every unset variable without a default is reported in one error.
 */
export function substituteEnv(text: string, env: Record<string, string | undefined>, format: 'yaml' | 'json' = 'yaml'): string {
  const missing = new Map<string, number[]>();
  const result = text.replace(REFERENCE, (reference: string, name: string, fallback: string | undefined, offset: number) => {
    // A commented-out line must not need its variables: `# auth_token: ${WORKER_TOKEN}` stays inert.
    if (format === 'yaml' && inYamlComment(text, offset)) return reference;
    const value = env[name];
    if (value !== undefined) return value;
    if (fallback !== undefined) return fallback;
    const line = lineOf(text, offset);
    const lines = missing.get(name);
    if (lines === undefined) missing.set(name, [line]);
    else lines.push(line);
    return reference;
  });
  if (missing.size > 0) {
    const issues: ConfigIssue[] = [...missing].map(([name, lines]) => ({
      path: `\${${name}}`,
      message: `environment variable ${name} is not set and the reference has no default (${lines.length === 1 ? 'line' : 'lines'} ${lines.join(', ')}); set it or write \${${name}:default}`,
    }));
    throw new ConfigError('CONFIG_INVALID', issues);
  }
  return result;
}

/**
 * Whether `offset` lies in a YAML comment: after a `#` that starts the line or follows whitespace,
 * outside single or double quotes, on the same line.
 */
function inYamlComment(text: string, offset: number): boolean {
  let quote: string | undefined;
  for (let i = text.lastIndexOf('\n', offset - 1) + 1; i < offset; i++) {
    const c = text[i];
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if (c === '#' && (i === 0 || text[i - 1] === ' ' || text[i - 1] === '\t' || text[i - 1] === '\n')) {
      return true;
    }
  }
  return false;
}

function lineOf(text: string, offset: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) line++;
  return line;
}
