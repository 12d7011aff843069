import type { IncomingMessage, ServerResponse } from 'node:http';
import type { InvocationTrace } from '../invocation/invoker.js';
import type { RequestTrace } from '../observability/tracing.js';
import type { HttpRoute, RoutingState } from '../routing/route-table.js';
import type { ApiRequest } from './api-request.js';
import type { RequestBodySource } from './request-channels.js';

/** Per-request state that the steps share; lives only as long as the request. */
export interface RequestState {
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  startedAt: number;
  deadline: number;
  engineHeaders: Record<string, string>;
  route: HttpRoute | undefined;
  /** The table view this request uses from start to end, even if the table changes meanwhile. */
  routing: RoutingState | undefined;
  apiRequest: ApiRequest | undefined;
  /** Set when the engine must not reuse the connection (unread body). */
  closeConnection: boolean;
  /** Counted against the concurrency limit. */
  admitted: boolean;
  /** The reply was written (or the request aborted). */
  finished: boolean;
  /** The request's trace: its span, and the context every invocation carries (docs/observability.md). */
  requestTrace: RequestTrace;
  /** Where the handler ran: this process's worker or a peer's (access log, metrics). */
  trace: InvocationTrace;
  /** The body as the handler's request_body channel gets it (set once the body was planned). */
  bodySource: RequestBodySource | undefined;
}
