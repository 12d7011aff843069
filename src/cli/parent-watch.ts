/**
 * Under `npm start`, npm (11) exits on SIGTERM without passing the signal on to the script it runs, so
 * a supervisor that stops `npm start` with SIGTERM left the engine running on its ports, orphaned.
 * When the engine was started by an npm script (npm sets `npm_lifecycle_event`), it checks once a
 * second whether the process that started it is still its parent, and calls `onGone` once when not.
 * Started any other way (node directly, a container's init, `nohup`) nothing is watched: outliving the
 * shell that started it is then what the operator asked for.
 */
export function watchNpmParent(onGone: (formerParent: number) => void, env: NodeJS.ProcessEnv = process.env, everyMs = 1000): () => void {
  if (env.npm_lifecycle_event === undefined) return () => undefined;
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    onGone(parent);
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
