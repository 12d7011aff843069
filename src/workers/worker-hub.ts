import { timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import { RoundRobin } from '../invocation/round-robin.js';
import type {
  CustomTriggerRecord,
  DepartedWorker,
  FunctionRecord,
  OwnerSnapshot,
  TriggerRecord,
  TriggerTypeRecord,
  WorkerSummary,
} from '../routing/registrations.js';
import type { SnapshotSource } from '../routing/route-table.js';

const tokensEqual = (a: string, b: string): boolean => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

/** At most this many departed workers are kept per process (memory bound under churn). */
const MAX_DEPARTED = 1024;

/** What a worker tells about itself through `engine::workers::register` (shown by the admin view). */
export type WorkerInfo = Omit<WorkerSummary, 'id' | 'connectedAt'>;

/**
 * What the hub reads of a connection. WorkerConnection is the one implementation; the hub is generic
 * over it so that it never imports the connection (which imports the hub), and tests pass plain objects.
 */
export interface HubMember {
  readonly id: string;
  readonly reattachToken: string;
  readonly connectedAt: number;
  readonly functions: ReadonlyMap<string, FunctionRecord>;
  readonly triggers: ReadonlyMap<string, TriggerRecord>;
  readonly triggerTypes: ReadonlyMap<string, TriggerTypeRecord>;
  readonly customTriggers: ReadonlyMap<string, CustomTriggerRecord>;
  readonly info: WorkerInfo;
  readonly isOpen: boolean;
  /** Who registered through this connection (worker-session.ts); unset: the main listener. */
  readonly principal?: string;
  /** Removes the connection at once on behalf of its reattached successor. */
  retire(): void;
}

/**
 * The workers connected to this process and what they registered: the local side of the table.
 * It answers "which local socket serves function X" for the invoker and builds this owner's snapshot
 * for the route table (memoised by version, so a burst of registrations builds it once).
 */
export class WorkerHub<C extends HubMember = HubMember> implements SnapshotSource {
  private readonly connections = new Map<string, C>();
  /** function id → the local connections serving it, in registration order. */
  private readonly owners = new Map<string, C[]>();
  private readonly replicas = new RoundRobin();
  private version = 0;
  private cached: OwnerSnapshot | undefined;
  private seq = 0;
  private readonly changeListeners = new Set<() => void>();
  private readonly departed = new Map<string, { record: DepartedWorker; timer: NodeJS.Timeout }>();

  /**
   * `reconnectGraceMs`: how long a disconnected worker's registrations stay in the snapshot as
   * departed (its routes keep matching and its functions are awaited); 0 removes them at once.
   */
  constructor(
    readonly ownerId: string,
    private readonly reconnectGraceMs = 0,
  ) {}

  get size(): number {
    return this.connections.size;
  }

  all(): IterableIterator<C> {
    return this.connections.values();
  }

  get(workerId: string): C | undefined {
    return this.connections.get(workerId);
  }

  onChange(listener: () => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  /** Orders trigger registrations made on this process. */
  nextSeq(): number {
    return ++this.seq;
  }

  add(connection: C): void {
    this.connections.set(connection.id, connection);
  }

  /**
   * Removes a connection and exactly what it registered; other connections' entries are untouched.
   * Within the reconnect grace its registrations are kept as departed, then dropped.
   */
  remove(connection: C): void {
    if (this.connections.get(connection.id) !== connection) return;
    this.connections.delete(connection.id);
    for (const functionId of connection.functions.keys()) this.unindex(functionId, connection);
    if (connection.functions.size === 0 && connection.triggers.size === 0 && connection.triggerTypes.size === 0 && connection.customTriggers.size === 0) {
      return;
    }
    // Trigger types and worker-provided triggers leave at once (as in iii): the type's provider is told.
    if (this.reconnectGraceMs > 0 && (connection.functions.size > 0 || connection.triggers.size > 0)) this.keepDeparted(connection);
    this.changed();
  }

  private keepDeparted(connection: C): void {
    // Bounded: under heavy churn the oldest departed worker is forgotten first (its grace cut short).
    if (this.departed.size >= MAX_DEPARTED) {
      const [oldestId, oldest] = this.departed.entries().next().value as [string, { timer: NodeJS.Timeout }];
      clearTimeout(oldest.timer);
      this.departed.delete(oldestId);
    }
    const record: DepartedWorker = {
      workerId: connection.id,
      ...(connection.principal === undefined ? {} : { principal: connection.principal }),
      since: connection.connectedAt,
      functionIds: [...connection.functions.keys()],
      triggers: [...connection.triggers.values()],
    };
    const timer = setTimeout(() => {
      this.departed.delete(connection.id);
      this.changed();
    }, this.reconnectGraceMs);
    timer.unref();
    this.departed.set(connection.id, { record, timer });
  }

  /**
   * Retires a worker's connection on behalf of its reattached successor, if the token is the one
   * this process gave it. `unknown`: no such connection here (gone already, or on another peer).
   */
  retire(workerId: string, reattachToken: string): 'retired' | 'wrong-token' | 'unknown' {
    const connection = this.connections.get(workerId);
    if (connection === undefined) return 'unknown';
    if (!tokensEqual(connection.reattachToken, reattachToken)) return 'wrong-token';
    connection.retire();
    return 'retired';
  }

  functionAdded(connection: C, functionId: string): void {
    let owners = this.owners.get(functionId);
    if (owners === undefined) {
      owners = [];
      this.owners.set(functionId, owners);
    }
    if (!owners.includes(connection)) owners.push(connection);
    this.changed();
  }

  functionRemoved(connection: C, functionId: string): void {
    this.unindex(functionId, connection);
    this.changed();
  }

  triggersChanged(): void {
    this.changed();
  }

  /** A worker told who it is (name, runtime): part of the snapshot the admin view reads. */
  infoChanged(): void {
    this.changed();
  }

  /**
   * A local connection serving the function, balanced round-robin over its replicas (a turn per
   * function). A socket that is already closing (its close frame arrived, cleanup not run yet) is
   * passed over for an open one.
   */
  pickOwner(functionId: string): C | undefined {
    const owners = this.owners.get(functionId);
    if (owners === undefined) return undefined;
    return this.replicas.pick(functionId, owners, (candidate) => candidate.isOpen);
  }

  has(functionId: string): boolean {
    return this.owners.has(functionId);
  }

  snapshot(): OwnerSnapshot {
    if (this.cached !== undefined && this.cached.version === this.version) return this.cached;
    const functions: FunctionRecord[] = [];
    const triggers: TriggerRecord[] = [];
    const workers: WorkerSummary[] = [];
    const triggerTypes: TriggerTypeRecord[] = [];
    const customTriggers: CustomTriggerRecord[] = [];
    for (const connection of this.connections.values()) {
      for (const fn of connection.functions.values()) functions.push(fn);
      for (const trigger of connection.triggers.values()) triggers.push(trigger);
      for (const type of connection.triggerTypes.values()) triggerTypes.push(type);
      for (const trigger of connection.customTriggers.values()) customTriggers.push(trigger);
      const { name, runtime, version, os, pid, description, ipAddress } = connection.info;
      workers.push({ id: connection.id, connectedAt: connection.connectedAt, name, runtime, version, os, pid, description, ipAddress });
    }
    this.cached = { ownerId: this.ownerId, version: this.version, functions, triggers, workers };
    if (triggerTypes.length > 0) this.cached.triggerTypes = triggerTypes;
    if (customTriggers.length > 0) this.cached.customTriggers = customTriggers;
    if (this.departed.size > 0) this.cached.departed = [...this.departed.values()].map((entry) => entry.record);
    return this.cached;
  }

  private unindex(functionId: string, connection: C): void {
    const owners = this.owners.get(functionId);
    if (owners === undefined) return;
    const index = owners.indexOf(connection);
    if (index >= 0) owners.splice(index, 1);
    if (owners.length === 0) {
      this.owners.delete(functionId);
      this.replicas.forget(functionId);
    }
  }

  private changed(): void {
    this.version++;
    for (const listener of this.changeListeners) listener();
  }
}

/** A peer relays a reattach: the hub retires that worker's connection if it is here and the token matches. */
export function retireRelayed(hub: Pick<WorkerHub, 'retire'>, logger: Logger): (workerId: string, token: string) => void {
  return (workerId, token) => {
    const result = hub.retire(workerId, token);
    if (result === 'retired') logger.info({ previousWorkerId: workerId }, 'retired a connection whose worker reattached on another peer');
    else if (result === 'wrong-token') logger.warn({ previousWorkerId: workerId }, 'retire request with a wrong reattach token ignored');
  };
}
