/**
 * The IPC link between a child and the primary, reduced to what the bus needs, so the bus and the
 * relay can be tested over an in-memory pair. Bus traffic is tagged `sy: "bus"` to share the channel
 * with the primary's other messages (status, shutdown).
 */
export interface IpcChannel {
  send(message: unknown): void;
  onMessage(listener: (message: unknown) => void): () => void;
}

export const BUS_TAG = 'bus';

export interface TaggedBusMessage {
  sy: typeof BUS_TAG;
  envelope: unknown;
}

export function isTaggedBusMessage(message: unknown): message is TaggedBusMessage {
  return typeof message === 'object' && message !== null && (message as { sy?: unknown }).sy === BUS_TAG;
}

/** The child's end of `node:cluster` IPC. */
export function processChannel(proc: NodeJS.Process = process): IpcChannel {
  return {
    send: (message) => {
      if (proc.connected && proc.send !== undefined) proc.send(message);
    },
    onMessage: (listener) => {
      proc.on('message', listener);
      return () => proc.off('message', listener);
    },
  };
}
