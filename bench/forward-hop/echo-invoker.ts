import type { InvocationOutcome, InvokeOptions, Invoker } from '../../src/invocation/invoker.js';
import { toJson } from '../../src/invocation/raw-json.js';

/**
 * A local invoker standing in for a worker socket: like the real one it turns the data into JSON
 * text for the worker frame and parses the answer back, then echoes the data. No I/O.
 */
export class EchoInvoker implements Invoker {
  invoke(_functionId: string, data: unknown, _options: InvokeOptions): Promise<InvocationOutcome> {
    return Promise.resolve({ ok: true, value: JSON.parse(toJson(data)) as unknown });
  }

  fire(): boolean {
    return true;
  }

  has(): boolean {
    return true;
  }
}
