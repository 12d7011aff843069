import { z } from 'zod';

/** iii-stream's config: owned by the stream module's author (docs/streaming.md); accepted as given until then. */
export const streamModuleSchema = z.record(z.string(), z.unknown()).describe('Streams: `stream::*` functions and the client WebSocket listener');

export type StreamModuleInput = z.output<typeof streamModuleSchema>;
