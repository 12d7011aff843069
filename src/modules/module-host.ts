import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { IpcChannel } from '../bus/ipc-channel.js';
import type { EngineConfig, IiiModuleName } from '../config/types.js';
import type { InvocationOutcome, Invoker } from '../invocation/invoker.js';
import type { OwnerSnapshot } from '../routing/registrations.js';
import type { EngineFunctions } from '../workers/engine-functions.js';
import type { EngineModule, ModuleContext, ModuleInvokeOptions, ModuleTrigger, ModuleTriggerType } from './module.js';
import { dropReasonOf } from './module.js';
import { WarnThrottle } from '../observability/warn-throttle.js';
import { MODULE_FACTORIES } from './module-factories.js';
import { ModuleMetrics } from './module-metrics.js';
import { IpcKvLink } from './storage/ipc-kv-store.js';
import { KvFile } from './storage/kv-file.js';
import { LazyRedisStore } from './storage/lazy-redis-store.js';
import type { KvStore, LeaseStore } from './storage/kv-store.js';
import { MemoryKvStore, MemoryLeaseStore } from './storage/memory-kv-store.js';
import type { KvStoreSpec } from './storage/store-specs.js';
import { storeIdOf, storeSpecOf } from './storage/store-specs.js';

export interface ModuleHostOptions {
  config: EngineConfig;
  logger: Logger;
  peerId: string;
  invoker: Invoker;
  registry: Registry;
  /** A cluster child's link to the primary: embedded `kv` stores and leases are held there. */
  primary?: IpcChannel;
}

/** The modules whose `adapter` names a key-value store (the primary holds theirs in embedded mode). */
const KV_MODULES: readonly IiiModuleName[] = ['iii-state', 'iii-stream'];

/**
 * Every store the configured modules name, by store id: the primary creates the embedded ones from
 * this, and each child asks for them by the same id.
 */
export function moduleStoreSpecs(config: EngineConfig): Map<string, KvStoreSpec> {
  const specs = new Map<string, KvStoreSpec>();
  for (const name of KV_MODULES) {
    const moduleConfig = config.modules[name];
    if (moduleConfig === undefined) continue;
    const spec = storeSpecOf(moduleConfig, { ...(config.cluster.redisUrl === undefined ? {} : { clusterRedisUrl: config.cluster.redisUrl }) });
    specs.set(storeIdOf(spec), spec);
  }
  return specs;
}

/**
 * The iii modules of one engine process (docs/modules.md): builds those the config lists, serves
 * their functions as engine functions, admits their trigger types, hands each the cluster's triggers
 * of its types after every table rebuild, and owns the stores they share.
 */
export class ModuleHost {
  private readonly modules: EngineModule[] = [];
  private readonly types = new Map<string, { module: EngineModule; type: ModuleTriggerType }>();
  private readonly stores = new Map<string, KvStore>();
  private readonly files: KvFile[] = [];
  private readonly link: IpcKvLink | undefined;
  private leaseStore: LeaseStore | undefined;
  private readonly metrics: ModuleMetrics;
  /** Drop warnings: a handler failing on every event must not flood the log (burst of 5 per 10 s per module and reason). */
  private readonly dropWarnings: WarnThrottle;
  private closing: Promise<void> | undefined;

  constructor(private readonly options: ModuleHostOptions) {
    this.metrics = new ModuleMetrics(options.registry);
    this.dropWarnings = new WarnThrottle(options.logger, 10_000, 5);
    const kvModules = Object.keys(options.config.modules).length > 0;
    // Embedded cluster: the primary holds the kv stores and the leases (src/supervisor/kv-host.ts).
    if (kvModules && options.primary !== undefined && options.config.cluster.redisUrl === undefined) this.link = new IpcKvLink(options.primary);
    for (const [name, factory] of Object.entries(MODULE_FACTORIES) as [IiiModuleName, (typeof MODULE_FACTORIES)[IiiModuleName]][]) {
      const moduleConfig = options.config.modules[name];
      if (moduleConfig === undefined || factory === undefined) continue;
      const module = factory(this.contextFor(name, moduleConfig));
      this.modules.push(module);
      for (const type of module.triggerTypes) this.types.set(type.id, { module, type });
    }
  }

  private contextFor(name: IiiModuleName, config: Readonly<Record<string, unknown>>): ModuleContext {
    const logger = this.options.logger.child({ module: name });
    return {
      logger,
      peerId: this.options.peerId,
      config,
      invoke: (functionId, data, options) => this.invoke(name, functionId, data, options),
      triggerDropped: (cause, fields, message) => {
        const reason = dropReasonOf(cause);
        this.metrics.triggerDropped(name, reason);
        const failure = cause === 'overflow' ? {} : { code: cause.code, reason: cause.message };
        this.dropWarnings.warn(`${name}:${reason}`, { module: name, dropReason: reason, ...failure, ...fields }, message);
      },
      hasFunction: (functionId) => this.options.invoker.has(functionId),
      kvStore: () => this.storeFor(config, logger),
      leases: () => this.leases(),
      leaseMs: this.options.config.cluster.leaseMs,
      registry: this.options.registry,
      cluster: { name: this.options.config.cluster.name, ...(this.options.config.cluster.redisUrl === undefined ? {} : { redisUrl: this.options.config.cluster.redisUrl }) },
      ...(this.options.primary === undefined ? {} : { primary: this.options.primary }),
    };
  }

  private async invoke(module: IiiModuleName, functionId: string, data: unknown, options: ModuleInvokeOptions = {}): Promise<InvocationOutcome> {
    const timeoutMs = options.timeoutMs ?? this.options.config.api.defaultTimeoutMs;
    const outcome = await this.options.invoker.invoke(functionId, data, {
      deadline: performance.now() + timeoutMs,
      ...(options.metadata === undefined ? {} : { metadata: options.metadata }),
      ...(options.traceparent === undefined ? {} : { traceparent: options.traceparent }),
      ...(options.baggage === undefined ? {} : { baggage: options.baggage }),
    });
    this.metrics.triggerCall(module, outcome.ok);
    return outcome;
  }

  private storeFor(config: Readonly<Record<string, unknown>>, logger: Logger): KvStore {
    const clusterRedisUrl = this.options.config.cluster.redisUrl;
    const spec = storeSpecOf(config, { ...(clusterRedisUrl === undefined ? {} : { clusterRedisUrl }) });
    const id = storeIdOf(spec);
    const held = this.stores.get(id);
    if (held !== undefined) return held;
    let store: KvStore;
    if (spec.kind === 'redis') store = this.redisStore(spec.url, logger);
    else if (this.link !== undefined) store = this.link.store(id);
    else {
      const memory = new MemoryKvStore();
      if (spec.file !== undefined) {
        const file = new KvFile(memory, spec.file.directory, spec.file.saveIntervalMs, logger);
        file.start();
        this.files.push(file);
      }
      store = memory;
    }
    this.stores.set(id, store);
    return store;
  }

  private redisStore(url: string, logger: Logger): KvStore & LeaseStore {
    const id = `redis:${url}`;
    const held = this.stores.get(id);
    if (held !== undefined) return held as KvStore & LeaseStore;
    const store = new LazyRedisStore(url, `${this.options.config.cluster.name}:`, logger);
    this.stores.set(id, store);
    return store;
  }

  private leases(): LeaseStore {
    if (this.leaseStore !== undefined) return this.leaseStore;
    const clusterRedisUrl = this.options.config.cluster.redisUrl;
    if (clusterRedisUrl !== undefined) this.leaseStore = this.redisStore(clusterRedisUrl, this.options.logger.child({ module: 'leases' }));
    else if (this.link !== undefined) this.leaseStore = this.link.leases();
    else this.leaseStore = new MemoryLeaseStore();
    return this.leaseStore;
  }

  /** The trigger types the modules provide (a worker cannot register these). */
  hasTriggerType(type: string): boolean {
    return this.types.has(type);
  }

  /** Why a `registertrigger` of a module's type is refused, or undefined when it is accepted. */
  validateTrigger(type: string, config: Record<string, unknown>): string | undefined {
    return this.types.get(type)?.type.validate?.(config);
  }

  /** The module trigger types, for engine::triggers::list. */
  triggerTypeList(): { id: string; description: string; module: string }[] {
    return [...this.types.values()].map(({ module, type }) => ({ id: type.id, description: type.description, module: module.name }));
  }

  registerFunctions(engineFunctions: EngineFunctions): void {
    for (const module of this.modules) {
      for (const [id, fn] of module.functions) {
        engineFunctions.register(id, async (data, caller) => {
          const result = await fn(data, caller);
          this.metrics.functionCall(id, result.ok ? 'ok' : result.error.code);
          return result;
        });
      }
    }
  }

  /** After a table rebuild: each module gets the cluster's triggers of its types. */
  reconcile(snapshots: readonly OwnerSnapshot[]): void {
    if (this.modules.length === 0) return;
    const byModule = new Map<EngineModule, ModuleTrigger[]>();
    for (const snapshot of snapshots) {
      for (const trigger of snapshot.customTriggers ?? []) {
        const owner = this.types.get(trigger.triggerType);
        if (owner === undefined) continue;
        const list = byModule.get(owner.module) ?? [];
        list.push({ ...trigger, ownerId: snapshot.ownerId });
        byModule.set(owner.module, list);
      }
    }
    for (const module of this.modules) {
      try {
        module.triggersChanged?.(byModule.get(module) ?? []);
      } catch (err) {
        this.options.logger.error({ err, module: module.name }, 'module failed to take the trigger list');
      }
    }
  }

  async start(): Promise<void> {
    for (const module of this.modules) await module.start();
  }

  /** Modules in reverse order, then the stores (a file store saves one last time). Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const module of [...this.modules].reverse()) {
        try {
          await module.close();
        } catch (err) {
          this.options.logger.error({ err, module: module.name }, 'module close failed');
        }
      }
      for (const file of this.files) file.close();
      for (const store of this.stores.values()) await store.close().catch(() => undefined);
      this.link?.close();
    })();
    return this.closing;
  }
}
