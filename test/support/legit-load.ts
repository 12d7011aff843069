import { http } from './http.js';

/**
 * Legitimate requests, one every 50 ms, while an attack runs: `stop()` ends the loop and says how many
 * answered 200 and how many did not (a refused connection counts as not).
 */
export function legitRequests(url: string): { stop(): Promise<{ ok: number; failed: number }> } {
  let running = true;
  const counts = { ok: 0, failed: 0 };
  const loop = (async () => {
    while (running) {
      const res = await http(url).catch(() => ({ status: 0 }));
      if (res.status === 200) counts.ok++;
      else counts.failed++;
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return counts;
    },
  };
}
