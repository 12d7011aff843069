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
const VARY_ONLY: CorsDecision = Object.freeze({ kind: 'headers', headers: Object.freeze({ vary: 'Origin' }) });

const ANY_METHODS = 'GET, HEAD, PUT, PATCH, POST, DELETE, OPTIONS';

export class CorsPolicy {
  private readonly origins: ReadonlySet<string> | undefined;
  private readonly anyOrigin: boolean;
  private readonly methods: ReadonlySet<string> | undefined;
  private readonly methodList: string;

  constructor(config: CorsConfig | undefined) {
    if (config === undefined) {
      this.anyOrigin = true;
      this.methodList = ANY_METHODS;
    } else {
      // As iii 0.22.1 (docs/compatibility.md): an empty origin list or `*` allows any origin, an empty
      // method list any method.
      this.anyOrigin = config.allowedOrigins.length === 0 || config.allowedOrigins.includes('*');
      this.origins = new Set(config.allowedOrigins);
      if (config.allowedMethods.length === 0) {
        this.methodList = ANY_METHODS;
      } else {
        this.methods = new Set(config.allowedMethods);
        this.methodList = config.allowedMethods.join(', ');
      }
    }
  }

  decide(method: string, headers: IncomingHttpHeaders): CorsDecision {
    const origin = headers.origin;
    // With a configured list the answer depends on Origin, with or without one: tell caches so.
    const varies = this.origins !== undefined && !this.anyOrigin;
    if (origin === undefined) return varies ? VARY_ONLY : { kind: 'none' };
    const requestedMethod = headers['access-control-request-method'];
    const isPreflight = method === 'OPTIONS' && typeof requestedMethod === 'string';
    const originAllowed = this.anyOrigin || (this.origins?.has(origin) ?? false);
    if (!originAllowed) return isPreflight ? { kind: 'preflight_rejected' } : varies ? VARY_ONLY : { kind: 'none' };

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
