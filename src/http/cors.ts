import type { IncomingHttpHeaders } from 'node:http';
import type { CorsConfig } from '../config/types.js';

/**
 * CORS (docs/http.md#cors). Unset: permissive, as iii is — any origin, preflights answered.
 * Set: only the listed origins (or "*") and methods; a reflected origin adds `Vary: Origin`.
 */
export type CorsDecision =
  | { kind: 'none' }
  | { kind: 'headers'; headers: Record<string, string> }
  | { kind: 'preflight'; headers: Record<string, string> }
  | { kind: 'preflight_rejected' };

const PREFLIGHT_MAX_AGE_SECONDS = '600';

export class CorsPolicy {
  private readonly origins: ReadonlySet<string> | undefined;
  private readonly anyOrigin: boolean;
  private readonly methods: ReadonlySet<string> | undefined;
  private readonly methodList: string;

  constructor(config: CorsConfig | undefined) {
    if (config === undefined) {
      this.anyOrigin = true;
      this.methodList = 'GET, HEAD, PUT, PATCH, POST, DELETE, OPTIONS';
    } else {
      this.anyOrigin = config.allowedOrigins.includes('*');
      this.origins = new Set(config.allowedOrigins);
      this.methods = new Set(config.allowedMethods);
      this.methodList = config.allowedMethods.join(', ');
    }
  }

  decide(method: string, headers: IncomingHttpHeaders): CorsDecision {
    const origin = headers.origin;
    if (origin === undefined) return { kind: 'none' };
    const requestedMethod = headers['access-control-request-method'];
    const isPreflight = method === 'OPTIONS' && typeof requestedMethod === 'string';
    const originAllowed = this.anyOrigin || (this.origins?.has(origin) ?? false);
    if (!originAllowed) return isPreflight ? { kind: 'preflight_rejected' } : { kind: 'none' };

    // With a configured list, echo the origin (and say the answer varies by origin).
    const base: Record<string, string> =
      this.origins === undefined
        ? { 'access-control-allow-origin': '*' }
        : { 'access-control-allow-origin': origin, vary: 'Origin' };
    if (!isPreflight) return { kind: 'headers', headers: base };

    const wanted = requestedMethod.toUpperCase();
    if (this.methods !== undefined && !this.methods.has(wanted)) return { kind: 'preflight_rejected' };
    const headersAsked = headers['access-control-request-headers'];
    return {
      kind: 'preflight',
      headers: {
        ...base,
        'access-control-allow-methods': this.methodList,
        ...(typeof headersAsked === 'string' ? { 'access-control-allow-headers': headersAsked } : {}),
        'access-control-max-age': PREFLIGHT_MAX_AGE_SECONDS,
      },
    };
  }
}
