// A cluster child's status reports to the primary (src/supervisor/child-engine.ts): readiness at once,
// the connected-worker and route counts at most once a second.
import { describe, expect, it } from 'vitest';
import { StatusReports } from '../../src/supervisor/child-engine.js';

describe('StatusReports', () => {
  it('sends the first report, then only changes: readiness at once, counts at most every interval', () => {
    const reports = new StatusReports(1000);
    expect(reports.due('false/false', '0/0', 0)).toBe(true);
    expect(reports.due('false/false', '0/0', 100)).toBe(false);
    // Readiness changed: at once, even 50 ms after the last report.
    expect(reports.due('true/true', '0/0', 150)).toBe(true);
    // Counts changed within the interval: held back, not lost.
    expect(reports.due('true/true', '2/10', 400)).toBe(false);
    expect(reports.due('true/true', '3/15', 900)).toBe(false);
    expect(reports.due('true/true', '3/15', 1150)).toBe(true);
    // Back to what was last sent: nothing to send.
    expect(reports.due('true/true', '3/15', 5000)).toBe(false);
    // A readiness change carries the counts of the moment with it.
    expect(reports.due('true/false', '4/20', 5100)).toBe(true);
    expect(reports.due('true/false', '4/20', 5200)).toBe(false);
  });
});
