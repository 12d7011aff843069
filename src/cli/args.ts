import type { LevelWithSilent } from 'pino';
import { isLogLevel, LOG_LEVELS } from '../observability/logger.js';

export interface CliArgs {
  configPath?: string;
  logLevel?: LevelWithSilent;
  help: boolean;
  version: boolean;
}

export const USAGE = `Usage: switchyard [--config FILE] [--log-level LEVEL]

  --config FILE       YAML or JSON config (default: ./config.yaml if present, else built-in defaults)
  --log-level LEVEL   ${LOG_LEVELS.join(' | ')} (default: info, or $LOG_LEVEL)
  --help              show this text
  --version           print the version
`;

export class UsageError extends Error {
  readonly code = 'USAGE';
}

/** Accepts `--flag value` and `--flag=value`. */
export function parseArgs(argv: readonly string[]): CliArgs {
  const args: CliArgs = { help: false, version: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const eq = arg.indexOf('=');
    const flag = eq === -1 ? arg : arg.slice(0, eq);
    const inline = eq === -1 ? undefined : arg.slice(eq + 1);
    const value = (): string => {
      const v = inline ?? argv[++i];
      // `--config --log-level` means the value is missing, not a file named "--log-level".
      if (v === undefined || v === '' || (inline === undefined && v.startsWith('--'))) {
        throw new UsageError(`${flag} needs a value`);
      }
      return v;
    };
    const noValue = (): void => {
      if (inline !== undefined) throw new UsageError(`${flag} takes no value`);
    };
    switch (flag) {
      case '--config':
      case '-c':
        args.configPath = value();
        break;
      case '--log-level': {
        const level = value();
        if (!isLogLevel(level)) throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(', ')}`);
        args.logLevel = level;
        break;
      }
      case '--help':
      case '-h':
        noValue();
        args.help = true;
        break;
      case '--version':
        noValue();
        args.version = true;
        break;
      default:
        throw new UsageError(`unknown argument ${arg}`);
    }
  }
  return args;
}
