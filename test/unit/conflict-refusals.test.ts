import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { OwnerSnapshot, TriggerRecord } from '../../src/routing/registrations.js';
import { RouteTable } from '../../src/routing/route-table.js';
import { validateTrigger } from '../../src/routing/trigger-config.js';
import { CONFLICT_SETTLE_MS, ConflictRefusals } from '../../src/workers/conflict-refusals.js';

function route(id: string, functionId: string, apiPath: string, registeredAt: number, workerId: string): TriggerRecord {
  const validated = validateTrigger('http', { api_path: apiPath, http_method: 'GET' }, false);
  if (!validated.ok) throw new Error(validated.message);
  return { ...validated.spec, id, functionId, workerId, registeredAt, seq: 0 };
}

const snapshot = (ownerId: string, version: number, triggers: TriggerRecord[]): OwnerSnapshot => ({
  ownerId,
  version,
  functions: triggers.map((t) => ({ id: t.functionId, workerId: t.workerId })),
  triggers,
});

/**
 * Process `local` with a table that also holds the sibling `remote`'s snapshot, as every child of a
 * cluster holds the whole table; `refused` lists the trigger ids it refused, in order.
 */
function setup(freshness?: { pass(): Promise<void> }) {
  const table = new RouteTable(false);
  let local = snapshot('local', 1, []);
  table.setLocalSource({ ownerId: 'local', snapshot: () => local });
  const refused: string[] = [];
  const refusals = new ConflictRefusals(
    'local',
    () => table.current(),
    () => ({ dropConflictingTrigger: (id) => refused.push(id), dropConflictingFunction: (id) => refused.push(id) }),
    () => undefined,
    freshness,
  );
  table.onChange((state) => refusals.seen(state));
  const registerLocally = (trigger: TriggerRecord): void => {
    local = snapshot('local', local.version + 1, [...local.triggers, trigger]);
    table.markChanged();
    table.current();
  };
  return { table, refusals, refused, registerLocally };
}

describe('ConflictRefusals: at once when the conflict is visible, after the settle time when it is a race', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("refuses at once a registration conflicting with another principal's route a sibling already held", () => {
    const { table, refusals, refused, registerLocally } = setup();
    table.applySnapshot(snapshot('remote', 1, [{ ...route('held', 'fa', '/c/:listId/:userId', 100, 'w-remote'), principal: 'rbac:tenant' }]));
    table.current();
    registerLocally(route('late', 'fb', '/c/:userId/:listId', 200, 'w-local'));
    expect(refused).toEqual(['late']);
    refusals.close();
  });

  it("refuses a conflict with its own principal's route on a sibling once the freshness barrier passed", async () => {
    let pass: () => void = () => undefined;
    const { table, refusals, refused, registerLocally } = setup({ pass: () => new Promise<void>((resolve) => (pass = resolve)) });
    table.applySnapshot(snapshot('remote', 1, [route('held', 'fa', '/c/:listId/:userId', 100, 'w-remote')]));
    table.current();
    registerLocally(route('late', 'fb', '/c/:userId/:listId', 200, 'w-local'));
    expect(refused).toEqual([]);
    pass();
    await vi.advanceTimersByTimeAsync(0);
    expect(refused).toEqual(['late']);
    refusals.close();
  });

  it("does not refuse it when the barrier shows the sibling's worker gone (a reconnect takes its route back)", async () => {
    let pass: () => void = () => undefined;
    const { table, refusals, refused, registerLocally } = setup({ pass: () => new Promise<void>((resolve) => (pass = resolve)) });
    table.applySnapshot(snapshot('remote', 1, [route('held', 'fa', '/c/:listId/:userId', 100, 'w-remote')]));
    table.current();
    registerLocally(route('late', 'fb', '/c/:userId/:listId', 200, 'w-local'));
    // The sibling's snapshot without its departed worker arrives before the barrier passes.
    table.applySnapshot(snapshot('remote', 2, []));
    table.current();
    pass();
    await vi.advanceTimersByTimeAsync(CONFLICT_SETTLE_MS);
    expect(refused).toEqual([]);
    refusals.close();
  });

  it("waits out the settle time for its own principal's route on a process it has no barrier with (another node)", () => {
    const { table, refusals, refused, registerLocally } = setup();
    table.applySnapshot(snapshot('remote', 1, [route('held', 'fa', '/c/:listId/:userId', 100, 'w-remote')]));
    table.current();
    registerLocally(route('late', 'fb', '/c/:userId/:listId', 200, 'w-local'));
    expect(refused).toEqual([]);
    vi.advanceTimersByTime(CONFLICT_SETTLE_MS);
    expect(refused).toEqual(['late']);
    refusals.close();
  });

  it('waits out the settle time when the holder\'s registration arrives after the one it beats (a race)', () => {
    const { table, refusals, refused, registerLocally } = setup();
    registerLocally(route('mine', 'fb', '/c/:userId/:listId', 200, 'w-local'));
    table.applySnapshot(snapshot('remote', 1, [route('older', 'fa', '/c/:listId/:userId', 100, 'w-remote')]));
    table.current();
    expect(refused).toEqual([]);
    // Another build meanwhile (a local change) does not cut the settle time short.
    registerLocally(route('other', 'fc', '/d', 300, 'w-local'));
    expect(refused).toEqual([]);
    vi.advanceTimersByTime(CONFLICT_SETTLE_MS);
    expect(refused).toEqual(['mine']);
    refusals.close();
  });

  it('does not refuse a race that resolves within the settle time (the holder\'s newer snapshot arrives)', () => {
    const { table, refusals, refused, registerLocally } = setup();
    registerLocally(route('mine', 'fb', '/c/:userId/:listId', 200, 'w-local'));
    table.applySnapshot(snapshot('remote', 1, [route('older', 'fa', '/c/:listId/:userId', 100, 'w-remote')]));
    table.current();
    table.applySnapshot(snapshot('remote', 2, []));
    table.current();
    vi.advanceTimersByTime(CONFLICT_SETTLE_MS);
    expect(refused).toEqual([]);
    refusals.close();
  });
});
