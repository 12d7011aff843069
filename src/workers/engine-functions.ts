import type { EngineWireError } from '../protocol/messages.js';

/** Who called an engine function: the worker connection the call came in on. */
export interface EngineCaller {
  readonly id: string;
  /** Records what the worker told about itself (engine::workers::register). */
  recordInfo(data: unknown): void;
  /** The caller's permissions: on a listener with `rbac`, introspection shows only what it may call. */
  readonly session?: {
    readonly restricted: boolean;
    /** The listener the worker connected to (its index in the config). */
    readonly policy?: { readonly index: number; readonly limits?: { readonly maxChannelsPerWorker: number; readonly maxChannels: number } };
    mayCall(functionId: string, metadata: Record<string, unknown> | undefined): boolean;
  };
}

/** An engine function's answer: a result, or a wire error (a registry code) as the worker will see it. */
export type EngineFunctionResult = { ok: true; value: unknown } | { ok: false; error: EngineWireError };

export type EngineFunction = (data: unknown, caller: EngineCaller) => EngineFunctionResult | Promise<EngineFunctionResult>;

/**
 * Functions the engine itself serves to workers (`engine::…`, docs/protocol.md#engine-functions).
 * A worker's `invokefunction` for one of these is answered here, on the process the worker is
 * connected to, and never reaches the invoker.
 */
export class EngineFunctions {
  private readonly functions = new Map<string, EngineFunction>();

  register(id: string, fn: EngineFunction): this {
    this.functions.set(id, fn);
    return this;
  }

  get(id: string): EngineFunction | undefined {
    return this.functions.get(id);
  }

  ids(): IterableIterator<string> {
    return this.functions.keys();
  }

  /** Runs one; a function that throws answers `invocation_failed` with the message. */
  async call(fn: EngineFunction, data: unknown, caller: EngineCaller): Promise<EngineFunctionResult> {
    try {
      return await fn(data, caller);
    } catch (err) {
      return { ok: false, error: { code: 'invocation_failed', message: err instanceof Error ? err.message : String(err) } };
    }
  }
}
