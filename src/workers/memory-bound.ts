import type { WorkersConfig } from '../config/types.js';
import { REGISTRATION_LIMITS } from '../protocol/limits.js';

/**
 * The memory bound of an engine process (docs/security.md#what-one-process-can-be-made-to-hold): the
 * RSS that the workers of its restricted listeners (those with `rbac`, open to tenants) can make it
 * reach, each at every limit of its listener at once, computed from the config. Workers of listeners
 * without `rbac` are trusted (the operator's own) and add what they use; so do the HTTP port's
 * requests (`concurrency_request_limit` x `body_limit`, the public API's capacity to size).
 *
 * The constants are measured on Node 20 (the figures are in docs/security.md); the rest follows from
 * the listeners' limits. The engine logs the bound at start and exposes it as
 * `switchyard_memory_bound_bytes{pid}`; `npm run attack` checks each process's RSS against its own.
 */
export const MEMORY_BOUND_CONSTANTS = Object.freeze({
  /** A child's own RSS with its listeners open and nothing connected (code, heap, buffers). */
  processBytes: 100 * 1024 * 1024,
  /** A primary's own RSS (it serves admin and relays the bus; it takes no worker). */
  primaryBytes: 90 * 1024 * 1024,
  /** One upgraded worker connection, idle (1,000 took a child from 70.7 to 83.9 MB). */
  connectionBytes: 14 * 1024,
  /** One connection not yet upgraded: its socket and parser, and a header block of up to 16 KiB. */
  pendingConnectionBytes: 20 * 1024,
  /** The read in hand on top of a listener's unfinished messages. */
  readBytes: 64 * 1024,
  /** Parsed registrations take about this many times their JSON (64 MiB of JSON took ~200 MB). */
  registrationParseFactor: 3,
  /** A frame being handled: its bytes, its text and what it parses to (one at a time per process). */
  frameCopies: 3,
  /**
   * What is freed and not yet collected or returned (GC lag): V8 collects dead buffers only once
   * external memory has grown by tens of MiB, and its heap grows before a full collection. Measured
   * under the attack script's churn (docs/security.md); the allowance is a fixed amount.
   */
  gcAllowanceBytes: 96 * 1024 * 1024,
});

export interface MemoryBound {
  /** The bound in bytes. */
  bytes: number;
  /** Each term, in bytes (the log line shows them). */
  terms: Record<string, number>;
  /** The part that does not depend on the number of processes in the cluster. */
  fixedBytes: number;
  /** What each engine process in the cluster adds (the restricted listeners' registrations it holds). */
  perProcessBytes: number;
}

/** The restricted listeners of a config: the first entry and its further ones, those with `rbac`. */
function restrictedListeners(workers: WorkersConfig): WorkersConfig[] {
  return [workers, ...workers.extraListeners].filter((listener) => listener.rbac !== undefined);
}

/** What one restricted listener's registrations put into every process, per process of the cluster (JSON). */
function registrationBytesPerProcess(listener: WorkersConfig): number {
  return Math.min(listener.maxListenerRegistrationBytes ?? REGISTRATION_LIMITS.processBytes, REGISTRATION_LIMITS.processBytes);
}

/**
 * The bound of a child (an engine process that takes workers) when the cluster has `processes`
 * engine processes in all (every process holds every process's registrations). All nodes are
 * assumed to have this config's listeners.
 */
export function engineMemoryBound(workers: WorkersConfig, processes: number): MemoryBound {
  const c = MEMORY_BOUND_CONSTANTS;
  const restricted = restrictedListeners(workers);
  const terms: Record<string, number> = { process: c.processBytes, gcAllowance: c.gcAllowanceBytes };
  let perProcess = 0;
  if (restricted.length > 0) {
    const add = (term: string, bytes: number) => (terms[term] = (terms[term] ?? 0) + bytes);
    for (const listener of restricted) {
      add('unfinishedMessages', listener.maxPartialFrameBytes + c.readBytes);
      add('connections', listener.maxConnections * (c.connectionBytes + c.pendingConnectionBytes));
      add('queues', listener.maxListenerQueuedBytes + listener.maxFrameBytes);
      add('calls', listener.maxListenerCallBytes);
      add('channelsInHand', listener.limits.maxChannels * 3 * listener.maxChannelFrameBytes);
      perProcess += registrationBytesPerProcess(listener) * c.registrationParseFactor;
    }
    // One per process: what all channels hold together (the first entry's), and the frame in hand.
    add('channelBuffer', workers.maxChannelBufferBytes);
    add('frameInHand', c.frameCopies * Math.max(...restricted.map((listener) => listener.maxFrameBytes)));
  }
  const fixedBytes = Object.values(terms).reduce((sum, bytes) => sum + bytes, 0);
  const count = Math.max(1, processes);
  if (perProcess > 0) terms.registrations = perProcess * count;
  return { bytes: fixedBytes + perProcess * count, terms, fixedBytes, perProcessBytes: perProcess };
}

/**
 * The bound of a primary: its own RSS and the snapshots it keeps to replay to a restarted child
 * (`children` of them, each holding at most its restricted listeners' registrations), with the same
 * allowance for what is not yet collected.
 */
export function primaryMemoryBound(workers: WorkersConfig, children: number): MemoryBound {
  const c = MEMORY_BOUND_CONSTANTS;
  const perProcess = restrictedListeners(workers).reduce((sum, listener) => sum + registrationBytesPerProcess(listener) * c.registrationParseFactor, 0);
  const terms: Record<string, number> = { process: c.primaryBytes, gcAllowance: c.gcAllowanceBytes };
  const fixedBytes = c.primaryBytes + c.gcAllowanceBytes;
  const count = Math.max(1, children);
  if (perProcess > 0) terms.registrations = perProcess * count;
  return { bytes: fixedBytes + perProcess * count, terms, fixedBytes, perProcessBytes: perProcess };
}
