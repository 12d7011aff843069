import type { CustomTriggerRecord, FunctionRecord, OwnerSnapshot, TriggerRecord, WorkerSummary } from '../routing/registrations.js';
import type { EngineCaller, EngineFunction, EngineFunctionResult } from '../workers/engine-functions.js';
import { isPlainObject } from '../values.js';

/**
 * The engine's introspection functions, with iii 0.22.1's names, inputs and output shapes
 * (docs/compatibility.md): functions, trigger types, registered triggers and workers.
 * They read the replicated table, so a worker on any process or node sees the whole cluster.
 */
export const INTROSPECTION_FUNCTIONS = {
  listFunctions: 'engine::functions::list',
  functionInfo: 'engine::functions::info',
  listTriggerTypes: 'engine::triggers::list',
  triggerTypeInfo: 'engine::triggers::info',
  listRegisteredTriggers: 'engine::registered-triggers::list',
  registeredTriggerInfo: 'engine::registered-triggers::info',
  listWorkers: 'engine::workers::list',
  workerInfo: 'engine::workers::info',
} as const;

/** What introspection reads: every owner's snapshot (this process's included) and the engine's own functions. */
export interface IntrospectionSource {
  snapshots(): readonly OwnerSnapshot[];
  engineFunctionIds(): Iterable<string>;
}

/** The trigger types the engine serves itself. */
const BUILT_IN_TRIGGER_TYPES: readonly { id: string; description: string }[] = [
  { id: 'http', description: 'Serve a function as an HTTP route (api_path, http_method)' },
  { id: 'http_middleware', description: 'Run a function as HTTP middleware in a lifecycle phase (phase, scope, priority)' },
];

/** The name the engine's own functions and trigger types are listed under. */
const ENGINE_WORKER_NAME = 'iii-engine-functions';
const CONFIG_SUMMARY_MAX_CHARS = 80;
const FUNCTION_INFO_BATCH_MAX = 32;

type Input = Record<string, unknown>;

interface Row {
  function_id: string;
  worker_name: string;
  description?: string;
  metadata?: Record<string, unknown>;
}

interface RegisteredRow {
  id: string;
  trigger_type: string;
  function_id: string;
  worker_name: string;
  config: unknown;
  config_summary: string;
}

interface TypeRow {
  id: string;
  worker_name: string;
  description: string;
}

/** One consistent read of the cluster's registrations, indexed for the functions below. */
class ClusterView {
  readonly functions = new Map<string, { record: FunctionRecord; workerName: string }>();
  readonly workers: (WorkerSummary & { functionCount: number; peer: string })[] = [];
  readonly triggers: RegisteredRow[] = [];
  readonly types = new Map<string, TypeRow>();
  private readonly workerNames = new Map<string, string>();

  constructor(source: IntrospectionSource) {
    const snapshots = source.snapshots();
    for (const snapshot of snapshots) {
      for (const worker of snapshot.workers ?? []) if (worker.name !== undefined) this.workerNames.set(worker.id, worker.name);
    }
    for (const snapshot of snapshots) {
      const counts = new Map<string, number>();
      for (const fn of snapshot.functions) {
        counts.set(fn.workerId, (counts.get(fn.workerId) ?? 0) + 1);
        // Replicas: the first one listed stands for the function (iii lists a function once).
        if (!this.functions.has(fn.id)) this.functions.set(fn.id, { record: fn, workerName: this.nameOf(fn.workerId, fn.id) });
      }
      for (const worker of snapshot.workers ?? []) this.workers.push({ ...worker, functionCount: counts.get(worker.id) ?? 0, peer: snapshot.ownerId });
      for (const trigger of snapshot.triggers) this.triggers.push(this.builtInRow(trigger));
      for (const trigger of snapshot.customTriggers ?? []) this.triggers.push(this.customRow(trigger));
      for (const type of snapshot.triggerTypes ?? []) {
        this.types.set(type.id, { id: type.id, worker_name: this.nameOf(type.workerId, type.id), description: type.description ?? '' });
      }
    }
    for (const type of BUILT_IN_TRIGGER_TYPES) this.types.set(type.id, { ...type, worker_name: ENGINE_WORKER_NAME });
    for (const id of source.engineFunctionIds()) {
      this.functions.set(id, { record: { id, workerId: '' }, workerName: ENGINE_WORKER_NAME });
    }
  }

  /** iii's fallback when a worker told no name: the function's first `::` segment. */
  private nameOf(workerId: string, id: string): string {
    return this.workerNames.get(workerId) ?? id.split('::')[0] ?? id;
  }

  private functionWorkerName(functionId: string): string {
    return this.functions.get(functionId)?.workerName ?? functionId.split('::')[0] ?? functionId;
  }

  private builtInRow(trigger: TriggerRecord): RegisteredRow {
    const config: Record<string, unknown> =
      trigger.type === 'http'
        ? {
            api_path: trigger.http.apiPath,
            http_method: trigger.http.httpMethod,
            ...(trigger.http.conditionFunctionId === undefined ? {} : { condition_function_id: trigger.http.conditionFunctionId }),
            ...(trigger.http.middlewareFunctionIds === undefined ? {} : { middleware_function_ids: trigger.http.middlewareFunctionIds }),
          }
        : {
            phase: trigger.middleware.phase,
            priority: trigger.middleware.priority,
            ...(trigger.middleware.scopePath === undefined ? {} : { scope: { path: trigger.middleware.scopePath } }),
          };
    return this.row(trigger.id, trigger.type, trigger.functionId, config);
  }

  private customRow(trigger: CustomTriggerRecord): RegisteredRow {
    return this.row(trigger.id, trigger.triggerType, trigger.functionId, trigger.config);
  }

  private row(id: string, type: string, functionId: string, config: unknown): RegisteredRow {
    const raw = JSON.stringify(config) ?? '{}';
    const chars = [...raw];
    const summary = chars.length <= CONFIG_SUMMARY_MAX_CHARS ? raw : `${chars.slice(0, CONFIG_SUMMARY_MAX_CHARS).join('')}…`;
    return { id, trigger_type: type, function_id: functionId, worker_name: this.functionWorkerName(functionId), config, config_summary: summary };
  }

  functionRow(id: string): Row | undefined {
    const entry = this.functions.get(id);
    if (entry === undefined) return undefined;
    const { record, workerName } = entry;
    return {
      function_id: id,
      worker_name: workerName,
      ...(record.description === undefined ? {} : { description: record.description }),
      ...(record.metadata === undefined ? {} : { metadata: record.metadata }),
    };
  }

  functionDetail(id: string): Record<string, unknown> | undefined {
    const row = this.functionRow(id);
    if (row === undefined) return undefined;
    const record = this.functions.get(id)?.record;
    return {
      ...row,
      ...(record?.requestFormat === undefined ? {} : { request_schema: record.requestFormat }),
      ...(record?.responseFormat === undefined ? {} : { response_schema: record.responseFormat }),
      registered_triggers: this.triggers
        .filter((t) => t.function_id === id)
        .map((t) => ({ id: t.id, trigger_type: t.trigger_type, config: t.config })),
    };
  }

  typeDetail(id: string): Record<string, unknown> | undefined {
    const type = this.types.get(id);
    if (type === undefined) return undefined;
    return { ...type, instance_count: this.triggers.filter((t) => t.trigger_type === id).length };
  }

  workerSummary(worker: ClusterView['workers'][number]): Record<string, unknown> {
    return {
      name: worker.name ?? null,
      description: worker.description ?? null,
      version: worker.version ?? null,
      id: worker.id,
      runtime: worker.runtime ?? null,
      os: worker.os ?? null,
      status: 'connected',
      function_count: worker.functionCount,
      connected_at_ms: worker.connectedAt,
      active_invocations: 0,
      isolation: null,
      ip_address: worker.ipAddress ?? null,
    };
  }
}

const str = (input: Input, key: string): string | undefined => (typeof input[key] === 'string' ? input[key] : undefined);
const searchMatches = (search: string | undefined, ...texts: (string | undefined)[]): boolean =>
  search === undefined || search === '' || texts.some((text) => (text ?? '').toLowerCase().includes(search.toLowerCase()));
const ok = (value: unknown): EngineFunctionResult => ({ ok: true, value });
const fail = (code: 'NOT_FOUND' | 'INVALID_ARGUMENTS', message: string): EngineFunctionResult => ({ ok: false, error: { code, message } });
const byKey = <T>(key: (item: T) => string) => (a: T, b: T): number => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0);
const asInput = (data: unknown): Input => (isPlainObject(data) ? data : {});

/** iii hides `engine::…` functions (except the queue ones) and functions tagged `metadata.internal`. */
function isInternal(row: Row): boolean {
  return (row.function_id.startsWith('engine::') && !row.function_id.startsWith('engine::queue::')) || row.metadata?.internal === true;
}

/** On a listener with `rbac`, a worker sees only the functions it may call (as iii filters them). */
function visible(caller: EngineCaller, functionId: string, metadata: Record<string, unknown> | undefined): boolean {
  const session = caller.session;
  return session === undefined || !session.restricted || session.mayCall(functionId, metadata);
}

export function introspectionFunctions(source: IntrospectionSource): [string, EngineFunction][] {
  const view = (): ClusterView => new ClusterView(source);
  return [
    [
      INTROSPECTION_FUNCTIONS.listFunctions,
      (data, caller) => {
        const input = asInput(data);
        const workers = Array.isArray(input.workers) ? input.workers.filter((w): w is string => typeof w === 'string') : [];
        const worker = str(input, 'worker');
        const prefix = str(input, 'prefix');
        const search = str(input, 'search');
        const current = view();
        const functions = [...current.functions.keys()]
          .map((id) => current.functionRow(id) as Row)
          .filter((row) => input.include_internal === true || !isInternal(row))
          .filter((row) => prefix === undefined || row.function_id.startsWith(prefix))
          .filter((row) => (worker === undefined && workers.length === 0) || row.worker_name === worker || workers.includes(row.worker_name))
          .filter((row) => searchMatches(search, row.function_id, row.description))
          .filter((row) => visible(caller, row.function_id, row.metadata))
          .sort(byKey((row) => row.function_id));
        return ok({ functions });
      },
    ],
    [
      INTROSPECTION_FUNCTIONS.functionInfo,
      (data, caller) => {
        const input = asInput(data);
        const single = str(input, 'function_id');
        const batch = Array.isArray(input.function_ids) ? input.function_ids : undefined;
        if (single !== undefined && batch !== undefined) return fail('INVALID_ARGUMENTS', 'pass either `function_id` or `function_ids`, not both');
        const current = view();
        if (single !== undefined) {
          if (!visible(caller, single, current.functionRow(single)?.metadata)) {
            return { ok: false, error: { code: 'FORBIDDEN', message: `Function '${single}' is not visible to this session.` } };
          }
          const detail = current.functionDetail(single);
          return detail !== undefined ? ok(detail) : fail('NOT_FOUND', `Function '${single}' is not registered.`);
        }
        if (batch === undefined) return fail('INVALID_ARGUMENTS', 'missing field `function_id` (or `function_ids` for a batch)');
        const ids = [...new Set(batch.filter((id): id is string => typeof id === 'string'))];
        if (ids.length === 0) return fail('INVALID_ARGUMENTS', '`function_ids` must be a non-empty array of function ids');
        if (ids.length > FUNCTION_INFO_BATCH_MAX) return fail('INVALID_ARGUMENTS', `too many function_ids (max ${FUNCTION_INFO_BATCH_MAX})`);
        return ok({
          functions: ids.map((id) =>
            !visible(caller, id, current.functionRow(id)?.metadata)
              ? { function_id: id, error: 'forbidden' }
              : (current.functionDetail(id) ?? { function_id: id, error: 'not_found' }),
          ),
        });
      },
    ],
    [
      INTROSPECTION_FUNCTIONS.listTriggerTypes,
      (data) => {
        const input = asInput(data);
        const prefix = str(input, 'prefix');
        const worker = str(input, 'worker');
        const search = str(input, 'search');
        const triggers = [...view().types.values()]
          .filter((type) => input.include_internal === true || !type.id.startsWith('engine::'))
          .filter((type) => prefix === undefined || type.id.startsWith(prefix))
          .filter((type) => worker === undefined || type.worker_name === worker)
          .filter((type) => searchMatches(search, type.id, type.description))
          .sort(byKey((type) => type.id));
        return ok({ triggers });
      },
    ],
    [
      INTROSPECTION_FUNCTIONS.triggerTypeInfo,
      (data) => {
        const id = str(asInput(data), 'id') ?? '';
        const detail = view().typeDetail(id);
        return detail === undefined ? fail('NOT_FOUND', `Trigger type '${id}' is not registered.`) : ok(detail);
      },
    ],
    [
      INTROSPECTION_FUNCTIONS.listRegisteredTriggers,
      (data) => {
        const input = asInput(data);
        const type = str(input, 'trigger_type');
        const functionId = str(input, 'function_id');
        const worker = str(input, 'worker');
        const search = str(input, 'search');
        const rows = view()
          .triggers.filter((row) => input.include_internal === true || !row.function_id.startsWith('engine::'))
          .filter((row) => type === undefined || row.trigger_type === type)
          .filter((row) => functionId === undefined || row.function_id === functionId)
          .filter((row) => worker === undefined || row.worker_name === worker)
          .filter((row) => searchMatches(search, row.id, row.trigger_type, row.function_id))
          .sort(byKey((row) => row.id));
        return ok({ registered_triggers: rows });
      },
    ],
    [
      INTROSPECTION_FUNCTIONS.registeredTriggerInfo,
      (data) => {
        const id = str(asInput(data), 'id') ?? '';
        const current = view();
        const row = current.triggers.find((t) => t.id === id);
        if (row === undefined) return fail('NOT_FOUND', `Registered trigger '${id}' was not found.`);
        const { config_summary: _summary, ...detail } = row;
        const trigger = current.typeDetail(row.trigger_type);
        const fn = current.functionDetail(row.function_id);
        return ok({ ...detail, ...(trigger === undefined ? {} : { trigger }), ...(fn === undefined ? {} : { function: fn }) });
      },
    ],
    [
      INTROSPECTION_FUNCTIONS.listWorkers,
      (data) => {
        const input = asInput(data);
        const runtime = str(input, 'runtime');
        const status = str(input, 'status');
        const search = str(input, 'search');
        const current = view();
        const workers = current.workers
          // iii lists the workers that registered themselves (engine::workers::register sends the pid).
          .filter((w) => w.pid !== undefined)
          .filter((w) => runtime === undefined || w.runtime === runtime)
          .filter(() => status === undefined || status === 'connected')
          .filter((w) => searchMatches(search, w.name))
          .sort(byKey((w) => `${w.name ?? w.id}\u0000${w.id}`))
          .map((w) => current.workerSummary(w));
        return ok({ workers });
      },
    ],
    [
      INTROSPECTION_FUNCTIONS.workerInfo,
      (data) => {
        const name = str(asInput(data), 'name') ?? '';
        const current = view();
        const worker = current.workers.find((w) => w.name === name);
        if (worker === undefined) return fail('NOT_FOUND', `Worker '${name}' is not connected.`);
        const functions = [...current.functions.values()]
          .filter((entry) => entry.record.workerId === worker.id)
          .map((entry) => current.functionRow(entry.record.id) as Row)
          .sort(byKey((row) => row.function_id));
        const ids = new Set(functions.map((row) => row.function_id));
        return ok({
          worker: { ...current.workerSummary(worker), pid: worker.pid ?? null, internal: false, latest_metrics: null },
          functions,
          trigger_types: [...current.types.values()].filter((type) => type.worker_name === name).sort(byKey((type) => type.id)),
          registered_triggers: current.triggers.filter((row) => ids.has(row.function_id)).sort(byKey((row) => row.id)),
        });
      },
    ],
  ];
}
