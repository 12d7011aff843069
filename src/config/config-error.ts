import { SwitchyardError } from '../errors.js';

export type ConfigErrorCode = 'CONFIG_INVALID' | 'CONFIG_UNREADABLE';

/** One problem with the configuration; `path` points into the file (`modules[1](class).config.port`). */
export interface ConfigIssue {
  path: string;
  message: string;
}

/**
 * Every configuration problem found, reported together so an operator fixes the file in one pass.
 * The message is printable as is: a header, then one `path: message` line per issue.
 */
export class ConfigError extends SwitchyardError {
  declare readonly code: ConfigErrorCode;
  readonly issues: ConfigIssue[];
  /** The file the configuration came from, when there was one. */
  readonly source: string | undefined;

  constructor(code: ConfigErrorCode, issues: ConfigIssue[], options: { source?: string; cause?: unknown } = {}) {
    super(code, formatMessage(code, issues, options.source), { cause: options.cause });
    this.name = 'ConfigError';
    this.issues = issues;
    this.source = options.source;
  }
}

function formatMessage(code: ConfigErrorCode, issues: readonly ConfigIssue[], source: string | undefined): string {
  const where = source === undefined ? '' : ` in ${source}`;
  // An unreadable file's issue path is the file itself, so the header does not repeat it.
  const header =
    code === 'CONFIG_UNREADABLE'
      ? 'Configuration file could not be read'
      : `Invalid configuration${where} (${issues.length} ${issues.length === 1 ? 'issue' : 'issues'})`;
  return [`${header}:`, ...issues.map((issue) => `  ${issue.path}: ${issue.message}`)].join('\n');
}
