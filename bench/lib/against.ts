import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../../test/support/processes.js';

/**
 * The engine as it was at an older commit, built once into <tmpdir>/switchyard-bench-against/<sha>/
 * (git archive of the commit, its own `npm ci` from its own lock file, its own `tsc` build), so `npm
 * run bench -- --against <commit>` measures today's engine and that one in the same run. Nothing of
 * the old tree is imported here: the old engine only runs as a process, started through its own
 * bin/switchyard.js. Outside this checkout: Node looks for a package the old build does not have in
 * every parent directory's node_modules, and inside the checkout it found today's (an optional
 * dependency added since, such as bufferutil, ran in both engines).
 */
export function engineBuiltAt(commit: string): { sha: string; bin: string } {
  const git = (...args: string[]): string => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  const sha = git('rev-parse', '--verify', `${commit}^{commit}`);
  const dir = join(tmpdir(), 'switchyard-bench-against', sha);
  const bin = join(dir, 'bin', 'switchyard.js');
  const done = join(dir, '.built');
  if (existsSync(done)) return { sha, bin };
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const say = (text: string): void => void process.stderr.write(`[bench against ${sha.slice(0, 8)}] ${text}\n`);
  say(`extracting ${sha} into ${dir}`);
  const archive = execFileSync('git', ['archive', '--format=tar', sha], { cwd: ROOT, maxBuffer: 1 << 30 });
  execFileSync('tar', ['-x', '-C', dir], { input: archive });
  // Scripts off: its `prepare` would build before the dev dependencies are in; the build follows.
  say('npm ci (its own lock file)');
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
  say('tsc -p tsconfig.build.json');
  execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: dir, stdio: ['ignore', 'inherit', 'inherit'] });
  writeFileSync(done, `${new Date().toISOString()}\n`);
  return { sha, bin };
}
