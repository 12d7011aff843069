import { describe, expect, it } from 'vitest';
import { parseArgs, USAGE, UsageError } from '../../src/cli/args.js';
import { LOG_LEVELS } from '../../src/observability/logger.js';

function usageError(argv: string[]): UsageError {
  try {
    parseArgs(argv);
  } catch (err) {
    if (err instanceof UsageError) return err;
    throw err;
  }
  throw new Error(`expected a UsageError for ${JSON.stringify(argv)}`);
}

describe('parseArgs', () => {
  it('defaults to no flags', () => {
    expect(parseArgs([])).toStrictEqual({ help: false, version: false });
  });

  it('reads --config and -c, separated or with =', () => {
    expect(parseArgs(['--config', 'a.yaml'])).toStrictEqual({ configPath: 'a.yaml', help: false, version: false });
    expect(parseArgs(['--config=b.json'])).toStrictEqual({ configPath: 'b.json', help: false, version: false });
    expect(parseArgs(['-c', 'c.yaml'])).toStrictEqual({ configPath: 'c.yaml', help: false, version: false });
    expect(parseArgs(['-c=d.yaml'])).toStrictEqual({ configPath: 'd.yaml', help: false, version: false });
  });

  it('keeps everything after the first = as the value', () => {
    expect(parseArgs(['--config=dir/a=b.yaml']).configPath).toBe('dir/a=b.yaml');
  });

  it('lets a later flag win', () => {
    expect(parseArgs(['--config', 'a.yaml', '--config', 'b.yaml']).configPath).toBe('b.yaml');
  });

  it('reads every log level', () => {
    for (const level of LOG_LEVELS) {
      expect(parseArgs(['--log-level', level]).logLevel).toBe(level);
      expect(parseArgs([`--log-level=${level}`]).logLevel).toBe(level);
    }
  });

  it('rejects an unknown log level', () => {
    const err = usageError(['--log-level', 'verbose']);
    expect(err.message).toBe(`--log-level must be one of ${LOG_LEVELS.join(', ')}`);
    expect(err.code).toBe('USAGE');
    expect(usageError(['--log-level=INFO']).message).toBe(`--log-level must be one of ${LOG_LEVELS.join(', ')}`);
  });

  it('reads --help, -h and --version', () => {
    expect(parseArgs(['--help'])).toStrictEqual({ help: true, version: false });
    expect(parseArgs(['-h'])).toStrictEqual({ help: true, version: false });
    expect(parseArgs(['--version'])).toStrictEqual({ help: false, version: true });
  });

  it('combines flags', () => {
    expect(parseArgs(['-c', 'x.yaml', '--log-level=debug', '--version'])).toStrictEqual({
      configPath: 'x.yaml',
      logLevel: 'debug',
      help: false,
      version: true,
    });
  });

  it('rejects a flag without its value', () => {
    expect(usageError(['--config']).message).toBe('--config needs a value');
    expect(usageError(['--config=']).message).toBe('--config needs a value');
    expect(usageError(['-c']).message).toBe('-c needs a value');
    expect(usageError(['--log-level']).message).toBe('--log-level needs a value');
    expect(usageError(['--config', '']).message).toBe('--config needs a value');
  });

  it('rejects unknown arguments and positionals, naming them', () => {
    expect(usageError(['--port', '3000']).message).toBe('unknown argument --port');
    expect(usageError(['config.yaml']).message).toBe('unknown argument config.yaml');
    expect(usageError(['--verbose=1']).message).toBe('unknown argument --verbose=1');
    expect(usageError(['-v']).message).toBe('unknown argument -v');
    expect(usageError(['--config', 'a.yaml', 'extra']).message).toBe('unknown argument extra');
  });

  it('UsageError is an Error with code USAGE', () => {
    const err = new UsageError('x');
    expect(err).toBeInstanceOf(Error);
    expect(err.code).toBe('USAGE');
    expect(err.message).toBe('x');
  });
});

describe('USAGE', () => {
  it('documents every flag and every log level', () => {
    for (const flag of ['--config FILE', '--log-level LEVEL', '--help', '--version']) expect(USAGE).toContain(flag);
    expect(USAGE).toContain(LOG_LEVELS.join(' | '));
    expect(USAGE.startsWith('Usage: switchyard ')).toBe(true);
  });
});
