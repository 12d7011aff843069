import { ChannelRegistry } from '../channels/channel-registry.js';
import type { EngineFunction } from '../workers/engine-functions.js';
import { DEFAULT_LIMITS } from '../workers/worker-session.js';

export const CREATE_CHANNEL_FUNCTION = 'engine::channels::create';

/** Why a channel was refused (switchyard_channels_refused_total{reason}). */
export type ChannelRefusal = 'per_worker' | 'per_listener';

export interface ChannelCreateEvents {
  created?(): void;
  refused?(reason: ChannelRefusal): void;
}

/**
 * engine::channels::create (iii's shape): `{buffer_size?}` in, `{writer, reader}` refs out, for two
 * workers to stream between them. The channel lives on the process the caller is connected to and
 * expires when an end stays unclaimed (channel-registry.ts); iii ties it to no worker, nor do we,
 * beyond counting it against its creator's limits until it is gone (docs/security.md#channels): the
 * listener's `max_channels_per_worker` per connection and `max_channels` for all its workers.
 */
export function createChannelFunction(registry: ChannelRegistry, events: ChannelCreateEvents = {}): EngineFunction {
  const byWorker = new Map<string, number>();
  const byListener = new Map<number, number>();
  const add = <K>(map: Map<K, number>, key: K, delta: number): void => {
    const next = (map.get(key) ?? 0) + delta;
    if (next <= 0) map.delete(key);
    else map.set(key, next);
  };
  return (data, caller) => {
    const listener = caller.session?.policy?.index ?? 0;
    const limits = caller.session?.policy?.limits ?? DEFAULT_LIMITS;
    const refusal: ChannelRefusal | undefined =
      (byWorker.get(caller.id) ?? 0) >= limits.maxChannelsPerWorker ? 'per_worker' : (byListener.get(listener) ?? 0) >= limits.maxChannels ? 'per_listener' : undefined;
    if (refusal !== undefined) {
      events.refused?.(refusal);
      const message =
        refusal === 'per_worker'
          ? `this worker has ${limits.maxChannelsPerWorker} channels open already (max_channels_per_worker)`
          : `this listener's workers have ${limits.maxChannels} channels open already (max_channels)`;
      return { ok: false, error: { code: 'too_many_channels', message } };
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
    events.created?.();
    return { ok: true, value: { writer: ChannelRegistry.ref(channel, 'write'), reader: ChannelRegistry.ref(channel, 'read') } };
  };
}
