// No test, benchmark or harness installs system packages by itself (issue 27, point 3): the one place
// that does is scripts/prerequisites.sh, run by the user (README, Quick start) and by .ci/run, with its
// output visible. A missing binary fails with that script named instead.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { nginxBinary } from '../support/nginx.js';
import { ROOT } from '../support/processes.js';

const SELF = fileURLToPath(import.meta.url);
const ALLOWED = new Set(['scripts/prerequisites.sh']);
/** A package manager asked to install (or refresh its lists, the first step of an install). */
const INSTALLS = /\b(?:apt-get|apt|aptitude|dnf|yum|zypper|apk|brew|snap|pip3?)\s+(?:-\S+\s+)*(?:install|add|update)\b|\bplaywright\s+install\b/;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'node_modules' || name.startsWith('.')) return [];
    if (statSync(path).isDirectory()) return sources(path);
    return /\.(?:[cm]?[jt]s|sh)$/.test(name) ? [path] : [];
  });
}

/** Lines that would run a package manager: code in files that can start a process, and every shell line. */
function installLines(path: string): string[] {
  const text = readFileSync(path, 'utf8');
  const runsCommands = path.endsWith('.sh') || text.includes('child_process');
  if (!runsCommands) return [];
  return text.split('\n').filter((line) => INSTALLS.test(line) && !/^\s*(?:\/\/|\*|#)/.test(line));
}

describe('prerequisites are installed up front, never by a test', () => {
  it('the pattern finds an install (so the scan below can fail)', () => {
    expect(INSTALLS.test("execFileSync('sh', ['-c', 'apt-get update -qq && apt-get install -y -qq nginx'])")).toBe(true);
    expect(INSTALLS.test('DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"')).toBe(true);
    expect(INSTALLS.test('npx playwright install chromium')).toBe(true);
    expect(INSTALLS.test("throw new Error('nginx is not installed: run scripts/prerequisites.sh')")).toBe(false);
  });

  it('no file under test/, bench/, chaos/, soak/, scripts/ or .ci/ runs a package manager, except scripts/prerequisites.sh', () => {
    const files = ['test', 'bench', 'chaos', 'soak', 'scripts'].flatMap((dir) => sources(join(ROOT, dir))).concat(join(ROOT, '.ci', 'run'));
    expect(files.length).toBeGreaterThan(50);
    const offenders = files
      .filter((path) => path !== SELF && !ALLOWED.has(relative(ROOT, path)))
      .flatMap((path) => installLines(path).map((line) => `${relative(ROOT, path)}: ${line.trim()}`));
    expect(offenders).toEqual([]);
    // The one allowed place does install, and .ci/run runs it before anything else needs the packages.
    expect(installLines(join(ROOT, 'scripts', 'prerequisites.sh')).length).toBeGreaterThan(0);
    const ci = readFileSync(join(ROOT, '.ci', 'run'), 'utf8');
    expect(ci.indexOf('scripts/prerequisites.sh')).toBeGreaterThan(0);
    expect(ci.indexOf('scripts/prerequisites.sh')).toBeLessThan(ci.indexOf('npm test'));
  });

  it('a missing nginx fails naming scripts/prerequisites.sh (the benchmark and the compose topology test share this)', () => {
    expect(() => nginxBinary(['/nonexistent/sbin/nginx'])).toThrow(/nginx is not installed.*scripts\/prerequisites\.sh/);
    expect(nginxBinary()).toMatch(/nginx$/);
  });
});
