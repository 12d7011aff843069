import { ChannelRegistry } from '../channels/channel-registry.js';
import type { EngineFunction } from '../workers/engine-functions.js';

export const CREATE_CHANNEL_FUNCTION = 'engine::channels::create';

/**
 * How many channels made by engine::channels::create may be open at once (docs/security.md#limits):
 * per worker connection, and per listener (all its workers together). Each channel buffers at most
 * 1 MiB (channel-registry.ts), so these bound what channels can hold in memory.
 */
export const MAX_CHANNELS_PER_WORKER = 64;
export const MAX_CHANNELS_PER_LISTENER = 1024;

/**
 * engine::channels::create (iii's shape): `{buffer_size?}` in, `{writer, reader}` refs out, for two
 * workers to stream between them. The channel lives on the process the caller is connected to and
 * expires when an end stays unclaimed (channel-registry.ts); iii ties it to no worker, nor do we,
 * beyond counting it against its creator's limits until it is gone. `onLimit`: a limit refused one (metrics).
 */
export function createChannelFunction(registry: ChannelRegistry, onLimit?: () => void): EngineFunction {
  const byWorker = new Map<string, number>();
  const byListener = new Map<number, number>();
  const add = <K>(map: Map<K, number>, key: K, delta: number): void => {
    const next = (map.get(key) ?? 0) + delta;
    if (next <= 0) map.delete(key);
    else map.set(key, next);
  };
  return (data, caller) => {
    const listener = caller.session?.policy?.index ?? 0;
    const problem =
      (byWorker.get(caller.id) ?? 0) >= MAX_CHANNELS_PER_WORKER
        ? `this worker has ${MAX_CHANNELS_PER_WORKER} channels open already`
        : (byListener.get(listener) ?? 0) >= MAX_CHANNELS_PER_LISTENER
          ? `this listener's workers have ${MAX_CHANNELS_PER_LISTENER} channels open already`
          : undefined;
    if (problem !== undefined) {
      onLimit?.();
      return { ok: false, error: { code: 'too_many_channels', message: problem } };
    }
    const requested = (data as { buffer_size?: unknown } | null | undefined)?.buffer_size;
    const bufferItems = typeof requested === 'number' && Number.isInteger(requested) && requested > 0 ? requested : undefined;
    add(byWorker, caller.id, 1);
    add(byListener, listener, 1);
    const onGone = (): void => {
      add(byWorker, caller.id, -1);
      add(byListener, listener, -1);
    };
    const channel = registry.create({ expires: true, onGone, ...(bufferItems === undefined ? {} : { bufferItems }) });
    return { ok: true, value: { writer: ChannelRegistry.ref(channel, 'write'), reader: ChannelRegistry.ref(channel, 'read') } };
  };
}
