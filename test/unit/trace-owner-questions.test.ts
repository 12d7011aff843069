import { afterEach, describe, expect, it } from 'vitest';
import type { IpcChannel } from '../../src/bus/ipc-channel.js';
import { memoryLink } from '../support/memory-ipc.js';
import { TraceOwnerHost, TraceOwnerQuestions, combineOwners } from '../../src/cluster/trace-owner-questions.js';
import { RecentTraceOwners } from '../../src/observability/trace-owners.js';

/** Two ends of an in-memory IPC link; a message arrives on a later turn, as over a real one. */
function channelPair(): [IpcChannel, IpcChannel] {
  const link = memoryLink();
  return [link.child, link.primary];
}

const T1 = '0af7651916cd43dd8448eb211c80319c';
const T2 = '1bf7651916cd43dd8448eb211c80319d';
const T3 = '2cf7651916cd43dd8448eb211c80319e';

describe('trace owner questions between the children of a node', () => {
  const closers: (() => void)[] = [];
  afterEach(() => {
    for (const close of closers.splice(0)) close();
  });

  /** The primary's host and `count` children, each with its own traces. */
  function node(count: number): { owners: RecentTraceOwners[]; questions: TraceOwnerQuestions[]; host: TraceOwnerHost; primaryEnds: IpcChannel[] } {
    const host = new TraceOwnerHost();
    const owners: RecentTraceOwners[] = [];
    const questions: TraceOwnerQuestions[] = [];
    const primaryEnds: IpcChannel[] = [];
    for (let i = 0; i < count; i++) {
      const [childEnd, primaryEnd] = channelPair();
      host.attach(primaryEnd);
      primaryEnds.push(primaryEnd);
      const mine = new RecentTraceOwners();
      owners.push(mine);
      const asker = new TraceOwnerQuestions(childEnd, mine);
      questions.push(asker);
      closers.push(() => asker.close(), () => host.detach(primaryEnd));
    }
    return { owners, questions, host, primaryEnds };
  }

  it('a child learns the one worker a sibling sent the trace to; nothing when none did', async () => {
    const { owners, questions } = node(3);
    owners[1]?.note(T1, 'w-1');
    // The asking child's own traces are not its siblings' answer.
    owners[0]?.note(T2, 'w-0');
    expect(await questions[0]?.ask(T1)).toBe('w-1');
    expect(await questions[0]?.ask(T2)).toBeUndefined();
    expect(await questions[2]?.ask(T3)).toBeUndefined();
  });

  it('a trace that siblings sent to different workers, or one sent to several, names nobody (null)', async () => {
    const { owners, questions } = node(3);
    owners[1]?.note(T1, 'w-1');
    owners[2]?.note(T1, 'w-2');
    expect(await questions[0]?.ask(T1)).toBeNull();
    owners[1]?.note(T2, 'w-1');
    owners[1]?.note(T2, 'w-3');
    expect(await questions[0]?.ask(T2)).toBeNull();
    // Two siblings naming the same worker agree.
    owners[1]?.note(T3, 'w-5');
    owners[2]?.note(T3, 'w-5');
    expect(await questions[0]?.ask(T3)).toBe('w-5');
  });

  it('a detached sibling is not asked; a question that is not a trace id is not answered', async () => {
    const { owners, questions, host, primaryEnds } = node(2);
    owners[1]?.note(T1, 'w-1');
    host.detach(primaryEnds[1] as IpcChannel);
    expect(await questions[0]?.ask(T1)).toBeUndefined();
    // Not a 32-hex trace id: the primary ignores it and the child's bounded wait ends in "unknown".
    expect(await questions[0]?.ask('not-a-trace')).toBeUndefined();
  });

  it('combineOwners: one name, several, or none', () => {
    expect(combineOwners([])).toBeUndefined();
    expect(combineOwners(['w-1', undefined, 'w-1'])).toBe('w-1');
    expect(combineOwners(['w-1', 'w-2'])).toBeNull();
    expect(combineOwners([null, 'w-1'])).toBeNull();
  });
});
