import type { ChannelAttachDecision, ChannelAttachRequest } from '../forwarding/forward-server.js';
import type { ChannelRegistry } from './channel-registry.js';
import { attachTunnelLink } from './tunnel-link.js';

/**
 * A peer asks to join one end of a channel held here (docs/streaming.md#across-the-cluster): refused
 * when the id, key or end does not match a free end; otherwise the socket, once told yes, carries
 * that end until either side ends it.
 */
export function channelAttachDecision(registry: Pick<ChannelRegistry, 'claim'>, request: ChannelAttachRequest): ChannelAttachDecision {
  const claim = registry.claim(request.channelId, request.key, request.direction);
  if (!claim.ok) return { refused: claim.reason };
  return {
    attach: (socket) => {
      if (!attachTunnelLink(socket, claim.channel, request.direction)) socket.destroy();
    },
  };
}
