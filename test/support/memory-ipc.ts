import type { IpcChannel } from '../../src/bus/ipc-channel.js';

/** Two ends of an in-memory stand-in for the node:cluster IPC channel between a child and the primary. */
export interface MemoryLink {
  child: IpcChannel;
  primary: IpcChannel;
  /** The child process died: nothing crosses any more. */
  sever(): void;
}

export function memoryLink(): MemoryLink {
  const listeners = { child: new Set<(m: unknown) => void>(), primary: new Set<(m: unknown) => void>() };
  let severed = false;
  const end = (self: 'child' | 'primary', other: 'child' | 'primary'): IpcChannel => ({
    send: (message) => {
      if (severed) return;
      const copy: unknown = JSON.parse(JSON.stringify(message)); // node:cluster IPC serialises as JSON
      setImmediate(() => {
        if (!severed) for (const listener of [...listeners[other]]) listener(copy);
      });
    },
    onMessage: (listener) => {
      listeners[self].add(listener);
      return () => listeners[self].delete(listener);
    },
  });
  return { child: end('child', 'primary'), primary: end('primary', 'child'), sever: () => (severed = true) };
}
