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
