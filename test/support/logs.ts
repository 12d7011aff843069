import type { EngineHandle } from './processes.js';

/** Polls `predicate` every 10 ms until it holds; fails after `timeoutMs`. */
export async function waitUntil(predicate: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The engine's log lines (JSON) that pass `test`. */
export function logLines(engine: EngineHandle, test: (line: Record<string, unknown>) => boolean): Record<string, unknown>[] {
  return engine.stdout.json().filter(test);
}

/**
 * The engine's log lines that pass `test`, once there are `count` of them: log lines travel on a pipe
 * (children write to it independently), so they may reach the test after an answer sent later.
 */
export async function awaitLogLines(
  engine: EngineHandle,
  test: (line: Record<string, unknown>) => boolean,
  count: number,
): Promise<Record<string, unknown>[]> {
  await waitUntil(() => logLines(engine, test).length >= count, 5000, `${count} matching log lines`);
  return logLines(engine, test);
}
