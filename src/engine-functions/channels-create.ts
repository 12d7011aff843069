import { ChannelRegistry } from '../channels/channel-registry.js';
import type { EngineFunction } from '../workers/engine-functions.js';

export const CREATE_CHANNEL_FUNCTION = 'engine::channels::create';

/**
 * engine::channels::create (iii's shape): `{buffer_size?}` in, `{writer, reader}` refs out, for two
 * workers to stream between them. The channel lives on the process the caller is connected to and
 * expires when an end stays unclaimed (channel-registry.ts); iii ties it to no worker, nor do we.
 */
export function createChannelFunction(registry: ChannelRegistry): EngineFunction {
  return (data) => {
    const requested = (data as { buffer_size?: unknown } | null | undefined)?.buffer_size;
    const bufferItems = typeof requested === 'number' && Number.isInteger(requested) && requested > 0 ? requested : undefined;
    const channel = registry.create({ expires: true, ...(bufferItems === undefined ? {} : { bufferItems }) });
    return { ok: true, value: { writer: ChannelRegistry.ref(channel, 'write'), reader: ChannelRegistry.ref(channel, 'read') } };
  };
}
