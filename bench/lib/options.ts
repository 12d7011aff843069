import { join } from 'node:path';
import { ROOT } from '../../test/support/processes.js';

/** The suite's command-line options and the sizes they imply (bench/run.ts). */
const args = process.argv.slice(2);
export const smoke = args.includes('--smoke');
export const strict = args.includes('--strict');
const onlyAt = args.indexOf('--only');
const only = onlyAt === -1 ? undefined : args[onlyAt + 1]?.toLowerCase();
const againstAt = args.indexOf('--against');
/** `--against <commit>`: also measure this checkout against the engine built at <commit> (bench/scenarios/against.ts). */
export const against = againstAt === -1 ? undefined : args[againstAt + 1];
/** `--against-local`: with --against, also the iii-sdk worker, 1 KiB body and middleware rows (group "local A/B vs …"). */
export const againstLocal = args.includes('--against-local');
export const selected = (name: string): boolean => only === undefined || name.toLowerCase().includes(only);

// Five short rounds rather than three long ones: this machine drifts over tens of seconds, and
// more alternations cancel more of it (same total time per subject). `--rounds N` asks for more, for
// an A/B (`--against`) whose effect is smaller than the spread of five.
const roundsAt = args.indexOf('--rounds');
export const RUNS = roundsAt !== -1 ? Math.max(1, Number(args[roundsAt + 1])) : smoke ? 1 : 5;
export const CONNECTIONS = smoke ? 16 : 64;
export const DURATION_MS = smoke ? 500 : 3000;
export const WARMUP_MS = smoke ? 250 : 1000;
export const SCALE_ROUTES = smoke ? 1000 : 10_000;
export const SCALE_WORKERS = smoke ? 50 : 1000;
export const MATCH_ITERATIONS = smoke ? 50_000 : 400_000;
export const RSS_LIMIT_MB = 150;

export const WORKERS_DIR = join(ROOT, 'bench', 'workers');
export const BASELINES_DIR = join(ROOT, 'bench', 'baselines');
export const ROUTES = 'GET /bench/hello,POST /bench/echo';
export const SERVED_BY = 'x-switchyard-served-by';
