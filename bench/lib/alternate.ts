/**
 * Runs a baseline and a scenario `rounds` times each, in turn, every other round backwards
 * (baseline, scenario; scenario, baseline; …), so a machine that slows down during the run hits both.
 */
export async function alternateRounds(rounds: number, baseline: () => Promise<void>, scenario: () => Promise<void>): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    if (round % 2 === 0) {
      await baseline();
      await scenario();
    } else {
      await scenario();
      await baseline();
    }
  }
}
