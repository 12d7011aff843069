import type { IpcChannel } from '../bus/ipc-channel.js';
import { answerIpcRequests, IpcRequester, SiblingQuestions } from '../bus/ipc-requests.js';

/**
 * A freshness barrier between the processes of one node (docs/cluster.md#freshness). A child that is
 * about to act on its copy of the siblings' registrations (today: handing a newly registered trigger
 * type's provider the triggers of that type) first asks the primary what it must hold. The primary
 * asks every other child to publish what it has pending at once and say its snapshot version; the
 * asking child then waits until its table holds at least those versions. So a worker that already
 * left a sibling by the time of the question is gone from the answer, in embedded mode (the relay
 * forwards each snapshot before the answer, on the same ordered channel) and in Redis mode alike.
 * Every step is bounded: a silent sibling or a slow bus delays the action, never blocks it.
 */

/** Child → primary: "what must I hold?"; answered with `{ peerId: version }`. */
export const FRESHNESS_TAG = 'freshness';
/** Primary → child: "publish what is pending, and say your version"; answered with `{ peerId, version }`. */
export const FRESHNESS_ASK_TAG = 'freshness-ask';

/** How long the primary waits for each sibling's answer. */
const ASK_TIMEOUT_MS = 1_000;
/** How long a child waits for the primary's answer (the siblings' answers included). */
const REQUEST_TIMEOUT_MS = 2_000;
/** How long a child then waits for its table to hold the versions it was given. */
const HOLD_TIMEOUT_MS = 2_000;

export type PeerVersions = Record<string, number>;

interface SiblingAnswer {
  peerId: string;
  version: number;
}

function isSiblingAnswer(value: unknown): value is SiblingAnswer {
  if (typeof value !== 'object' || value === null) return false;
  const { peerId, version } = value as Record<string, unknown>;
  return typeof peerId === 'string' && typeof version === 'number' && Number.isFinite(version);
}

const anyBody = (message: Record<string, unknown>): message is Record<string, unknown> => typeof message === 'object';

/** The primary's side: answers each child's question by asking every other child. */
export class FreshnessHost extends SiblingQuestions<Record<string, unknown>> {
  constructor() {
    super(FRESHNESS_TAG, FRESHNESS_ASK_TAG, ASK_TIMEOUT_MS, 'a freshness question', anyBody, (answers) => {
      const versions: PeerVersions = {};
      for (const answer of answers) if (isSiblingAnswer(answer)) versions[answer.peerId] = answer.version;
      return versions;
    });
  }
}

/** What a child's barrier needs of its engine. */
export interface FreshnessLocal {
  /** This process's peer id (left out of the wait). */
  readonly peerId: string;
  /** Publishes pending local registrations now; the version published, or undefined before joining. */
  flush(): number | undefined;
  /** The version held for each sibling's snapshot. */
  heldVersions(): ReadonlyMap<string, number>;
  /** Called after each table change; returns the unsubscribe. */
  onChange(listener: () => void): () => void;
}

/** A child's side: answers the primary's asks, and passes a barrier when asked to. */
export class FreshnessBarrier {
  private readonly requester: IpcRequester<Record<string, never>>;
  private readonly unsubscribe: () => void;

  constructor(
    channel: IpcChannel,
    private readonly local: FreshnessLocal,
  ) {
    this.requester = new IpcRequester<Record<string, never>>(channel, FRESHNESS_TAG, REQUEST_TIMEOUT_MS, () => 'a freshness question');
    this.unsubscribe = answerIpcRequests(channel, FRESHNESS_ASK_TAG, anyBody, () => {
      const version = local.flush();
      return version === undefined ? null : { peerId: local.peerId, version };
    });
  }

  /**
   * Resolves once this process's table holds every sibling's registrations as they stood when it was
   * called, or once a bound runs out (then it resolves all the same: the caller acts on what it holds).
   */
  async pass(): Promise<void> {
    let wanted: PeerVersions;
    try {
      const answer = await this.requester.request({});
      wanted = typeof answer === 'object' && answer !== null ? (answer as PeerVersions) : {};
    } catch {
      return;
    }
    await this.holding(wanted);
  }

  close(): void {
    this.unsubscribe();
    this.requester.close();
  }

  private holding(wanted: PeerVersions): Promise<void> {
    const held = (): boolean => {
      const versions = this.local.heldVersions();
      return Object.entries(wanted).every(([peerId, version]) => peerId === this.local.peerId || (versions.get(peerId) ?? -1) >= version);
    };
    if (held()) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        stop();
        resolve();
      };
      const timer = setTimeout(done, HOLD_TIMEOUT_MS);
      const stop = this.local.onChange(() => {
        if (held()) done();
      });
    });
  }
}
