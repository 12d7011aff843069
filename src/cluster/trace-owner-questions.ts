import type { IpcChannel } from '../bus/ipc-channel.js';
import { answerIpcRequests, IpcRequester, SiblingQuestions } from '../bus/ipc-requests.js';
import type { TraceOwner, TraceOwnerLookup } from '../observability/trace-owners.js';

/**
 * "Which worker did this trace go to?" between the processes of one node (docs/observability.md#workers-log-records).
 * A worker's telemetry socket may reach another child than the one holding its worker socket, and only
 * the child that sent an invocation knows which worker its trace went to (observability/trace-owners.ts).
 * A child that cannot attribute a log record asks the primary; the primary asks every other child and
 * answers the one worker they name, or nothing when none knows the trace or it went to several
 * workers. Bounded like the freshness barrier: a silent sibling is left out, a slow answer times out.
 * Nodes joined over Redis are not asked.
 */

/** Child → primary: `{traceId}`; answered with a worker id, null (several workers) or nothing (none). */
export const TRACE_OWNER_TAG = 'trace-owner';
/** Primary → child: `{traceId}`; answered with the child's own lookup (a worker id, null for several, or nothing). */
export const TRACE_OWNER_ASK_TAG = 'trace-owner-ask';

/** How long the primary waits for each sibling. */
const ASK_TIMEOUT_MS = 250;
/** How long a child waits for the primary's answer (the siblings' included). */
export const TRACE_OWNER_TIMEOUT_MS = 500;

const TRACE_ID = /^[0-9a-f]{32}$/;

function isQuestion(message: Record<string, unknown>): message is Record<string, unknown> & { traceId: string } {
  return typeof message.traceId === 'string' && TRACE_ID.test(message.traceId);
}

/** The siblings' answers as one: the single worker they name, null when they name several, undefined when none knows it. */
export function combineOwners(answers: readonly unknown[]): TraceOwner {
  let found: string | undefined;
  for (const answer of answers) {
    if (answer === null) return null; // a sibling sent it to several workers
    if (typeof answer !== 'string') continue;
    if (found !== undefined && found !== answer) return null;
    found = answer;
  }
  return found;
}

/** The primary's side: answers a child's question by asking every other child. */
export class TraceOwnerHost extends SiblingQuestions<{ traceId: string }> {
  constructor() {
    // Over IPC an undefined answer arrives as a missing value: "not seen", which combineOwners skips.
    super(TRACE_OWNER_TAG, TRACE_OWNER_ASK_TAG, ASK_TIMEOUT_MS, 'a trace owner question', isQuestion, combineOwners);
  }
}

/** A child's side: answers the primary's questions from its own traces, and asks about others'. */
export class TraceOwnerQuestions {
  private readonly requester: IpcRequester<{ traceId: string }>;
  private readonly unsubscribe: () => void;

  constructor(channel: IpcChannel, local: TraceOwnerLookup) {
    this.requester = new IpcRequester<{ traceId: string }>(channel, TRACE_OWNER_TAG, TRACE_OWNER_TIMEOUT_MS, () => 'a trace owner question');
    this.unsubscribe = answerIpcRequests(channel, TRACE_OWNER_ASK_TAG, isQuestion, (question): TraceOwner => local.ownerOf(question.traceId));
  }

  /**
   * What the siblings know of this trace: the one worker they sent it to, null when they sent it to
   * several, undefined when none did or no answer came in time.
   */
  async ask(traceId: string): Promise<TraceOwner> {
    try {
      const answer = await this.requester.request({ traceId });
      if (answer === null) return null;
      return typeof answer === 'string' && answer !== '' ? answer : undefined;
    } catch {
      return undefined;
    }
  }

  close(): void {
    this.unsubscribe();
    this.requester.close();
  }
}
