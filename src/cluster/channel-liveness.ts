import type { ChannelActivity, ChannelLiveness, ChannelSighting } from '../channels/channel-activity.js';
import type { IpcChannel } from '../bus/ipc-channel.js';
import { answerIpcRequests, IpcRequester, SiblingQuestions } from '../bus/ipc-requests.js';

/**
 * "Did any of these channels move data lately?", asked across the processes of one node
 * (docs/reliability.md#frozen-or-half-open-worker-heartbeat). A worker's channel sockets connect to
 * the same port as its main socket, so they land on a process of the same node, but not
 * necessarily the one that holds the worker. The heartbeat asks only when it is about to drop a
 * silent worker whose calls in flight carry channels: this process's record first; only if that
 * shows nothing recent, the primary, which asks every other child and answers with the most recent
 * of their answers. One round trip, on the rare path; every step is bounded, and a sibling that does
 * not answer counts as one that saw nothing (the worker is then dropped, as without this check).
 */

/** Child → primary: `{ids}`; answered with the ms since the most recent data on any of them, or null. */
export const CHANNEL_LIVENESS_TAG = 'channel-liveness';
/** Primary → child: the same question about that child's own sockets. */
export const CHANNEL_LIVENESS_ASK_TAG = 'channel-liveness-ask';

/** How long the primary waits for each sibling's answer. */
const ASK_TIMEOUT_MS = 1_000;
/** How long a child waits for the primary's answer (the siblings' answers included). */
const REQUEST_TIMEOUT_MS = 1_500;
/** A question names at most this many channels (the heartbeat asks about fewer). */
const MAX_IDS = 256;

interface Question extends Record<string, unknown> {
  ids: string[];
}

function isQuestion(message: Record<string, unknown>): message is Question {
  const ids = message.ids;
  return Array.isArray(ids) && ids.length <= MAX_IDS && ids.every((id) => typeof id === 'string');
}

const isAgo = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value) && value >= 0;

/** The most recent of two answers (undefined: nothing seen). */
const sooner = (a: number | undefined, b: number | undefined): number | undefined => (a === undefined ? b : b === undefined ? a : Math.min(a, b));

/** The primary's side: answers a child's question with the most recent data any other child saw. */
export class ChannelLivenessHost extends SiblingQuestions<Question> {
  constructor() {
    super(CHANNEL_LIVENESS_TAG, CHANNEL_LIVENESS_ASK_TAG, ASK_TIMEOUT_MS, 'a channel liveness question', isQuestion, (answers) => {
      let ago: number | undefined;
      for (const answer of answers) if (isAgo(answer)) ago = sooner(ago, answer);
      return ago ?? null;
    });
  }
}

/**
 * A child's side (the heartbeat's ChannelLiveness, src/workers/worker-connection.ts): looks at its
 * own record, then asks its siblings through the primary; answers the primary's questions about its
 * own record. Without a primary (a single-process engine) its own record is all there is.
 */
export class ChannelLivenessProbe implements ChannelLiveness {
  private readonly requester: IpcRequester<Question> | undefined;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly activity: ChannelActivity,
    primary?: IpcChannel,
  ) {
    if (primary === undefined) {
      this.requester = undefined;
      this.unsubscribe = () => undefined;
      return;
    }
    this.requester = new IpcRequester<Question>(primary, CHANNEL_LIVENESS_TAG, REQUEST_TIMEOUT_MS, () => 'a channel liveness question');
    this.unsubscribe = answerIpcRequests(primary, CHANNEL_LIVENESS_ASK_TAG, isQuestion, (question) => activity.lastMovedAgo(question.ids) ?? null);
  }

  /**
   * The most recent data on any of `channelIds` through a worker's socket of this node (undefined:
   * none lately). The siblings are asked only when this process saw nothing within `withinMs`.
   */
  async lastMoved(channelIds: readonly string[], withinMs: number): Promise<ChannelSighting | undefined> {
    const ids = channelIds.slice(0, MAX_IDS);
    const agoHere = this.activity.lastMovedAgo(ids);
    const here: ChannelSighting | undefined = agoHere === undefined ? undefined : { agoMs: agoHere, where: 'here' };
    if ((agoHere !== undefined && agoHere < withinMs) || this.requester === undefined || ids.length === 0) return here;
    let agoThere: number | undefined;
    try {
      const answer = await this.requester.request({ ids });
      agoThere = isAgo(answer) ? answer : undefined;
    } catch {
      agoThere = undefined;
    }
    if (agoThere === undefined || (agoHere !== undefined && agoHere <= agoThere)) return here;
    return { agoMs: agoThere, where: 'sibling' };
  }

  close(): void {
    this.unsubscribe();
    this.requester?.close();
  }
}
