import { createHmac, randomUUID } from 'node:crypto';
import { lookup as dnsLookup } from 'node:dns';
import type { LookupAddress } from 'node:dns';
import type { Agent, request } from 'undici';
import type { HttpFunctionsConfig } from '../config/types.js';
import type { WireErrorCode } from '../errors.js';
import type { HttpInvocation } from '../routing/registrations.js';
import type { InvocationOutcome } from './invoker.js';
import { engineFailure } from './invoker.js';
import { toJson } from './raw-json.js';
import { isAddressLiteral, isPrivateAddress } from './private-address.js';

/**
 * Calls HTTP-invoked functions (a worker's `registerfunction` with `invocation`), as iii 0.22.1 does
 * (docs/protocol.md#http-invoked-functions): a JSON body, the
 * `x-iii-*` headers, the auth the registration names (secrets read from this process's environment),
 * the iii-http-functions allowlist and private-address rules. Redirects are not followed. A call is
 * made once: its failure is the function's failure, never a reason to try another replica.
 */

const DEFAULT_TIMEOUT_MS = 30_000;
/** Bound on a response body read into memory (a function result, like a worker frame). */
const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

/** An address a function URL may not reach when `block_private_ips` is on (every spelling: private-address.ts). */
export { isPrivateAddress };

/** iii matches allowlist entries as glob patterns (`*`, `?`) against the URL's host. */
function globToRegExp(pattern: string): RegExp {
  const escaped = pattern.toLowerCase().replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
  return new RegExp(`^${escaped}$`);
}

export type UrlCheck = { ok: true; url: URL } | { ok: false; message: string };

export class HttpFunctionCaller {
  private readonly allowlist: readonly RegExp[];
  /** undici and the agent, loaded on the first call: most engines never call an HTTP function. */
  private client: Promise<{ agent: Agent; request: typeof request }> | undefined;

  constructor(
    private readonly config: HttpFunctionsConfig,
    private readonly env: Readonly<Record<string, string | undefined>>,
  ) {
    this.allowlist = config.urlAllowlist.map(globToRegExp);
  }

  private undici(): Promise<{ agent: Agent; request: typeof request }> {
    this.client ??= import('undici').then((undici) => ({
      agent: new undici.Agent({
        keepAliveTimeout: 10_000,
        connections: 64,
        // The address actually connected to is checked, not only the one a first lookup returned:
        // a DNS answer that changes between check and connect cannot reach a private address.
        connect: this.config.blockPrivateIps ? { lookup: guardedLookup } : {},
      }),
      request: undici.request,
    }));
    return this.client;
  }

  /** The URL rules that need no network (scheme, allowlist, a literal private address). */
  checkUrl(raw: string): UrlCheck {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return { ok: false, message: 'Invalid URL' };
    }
    if (this.config.requireHttps && url.protocol !== 'https:') return { ok: false, message: 'HTTPS is required' };
    const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
    if (!this.allowlist.some((pattern) => pattern.test(host))) return { ok: false, message: 'URL not in allowlist' };
    if (this.config.blockPrivateIps && isAddressLiteral(host) && isPrivateAddress(host)) return { ok: false, message: 'Private IP blocked' };
    return { ok: true, url };
  }

  /** A registration is refused when its URL breaks the rules or its auth names an unset variable (as iii). */
  checkRegistration(invocation: HttpInvocation): string | undefined {
    const url = this.checkUrl(invocation.url);
    if (!url.ok) return `url_validation_failed: ${url.message}`;
    const key = this.authKey(invocation);
    if (key !== undefined && this.env[key] === undefined) return `missing_env_var: environment variable '${key}' is not set`;
    return undefined;
  }

  private authKey(invocation: HttpInvocation): string | undefined {
    const auth = invocation.auth;
    if (auth === undefined) return undefined;
    return auth.type === 'hmac' ? auth.secretKey : auth.type === 'bearer' ? auth.tokenKey : auth.valueKey;
  }

  /** Calls the function's URL once, within `remainingMs` of the caller's deadline. */
  async call(functionId: string, invocation: HttpInvocation, data: unknown, remainingMs: number, invocationId: string = randomUUID()): Promise<InvocationOutcome> {
    const url = this.checkUrl(invocation.url);
    if (!url.ok) return workerError('url_validation_failed', url.message);
    // Forwarded calls carry their payload as raw JSON text (raw-json.ts): sent as it came.
    const body = Buffer.from(toJson(data ?? null));
    const timestamp = Math.floor(Date.now() / 1000);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'x-iii-function-path': functionId,
      'x-iii-invocation-id': invocationId,
      'x-iii-timestamp': String(timestamp),
      ...invocation.headers,
    };
    const auth = invocation.auth;
    if (auth !== undefined) {
      const secret = this.env[this.authKey(invocation) as string];
      if (secret === undefined) {
        const [code, what]: [WireErrorCode, string] =
          auth.type === 'hmac' ? ['secret_not_found', 'Secret'] : auth.type === 'bearer' ? ['token_not_found', 'Token'] : ['api_key_not_found', 'API key'];
        return workerError(code, `${what} not found: ${this.authKey(invocation) as string}`);
      }
      if (auth.type === 'hmac') {
        const signature = createHmac('sha256', secret).update(`${timestamp}:${body.toString('base64')}`).digest('hex');
        headers['x-iii-signature'] = `sha256=${signature}`;
      } else if (auth.type === 'bearer') {
        headers.authorization = `Bearer ${secret}`;
      } else {
        headers[auth.header.toLowerCase()] = secret;
      }
    }
    const timeoutMs = Math.max(1, Math.ceil(Math.min(invocation.timeoutMs ?? DEFAULT_TIMEOUT_MS, remainingMs)));
    const signal = AbortSignal.timeout(timeoutMs);
    let status: number;
    let bytes: Buffer;
    try {
      const { agent, request } = await this.undici();
      const response = await request(url.url, {
        method: invocation.method as 'POST',
        headers,
        body: invocation.method === 'GET' ? null : body,
        dispatcher: agent,
        signal,
      });
      status = response.statusCode;
      bytes = await readBounded(response.body);
    } catch (err) {
      if (signal.aborted) return engineFailure('TIMEOUT', `${functionId}: no answer from ${url.url.origin} within ${timeoutMs} ms`);
      return workerError('http_request_failed', describeError(err));
    }
    if (status >= 200 && status < 300) {
      if (bytes.length === 0) return { ok: true, value: undefined };
      try {
        return { ok: true, value: JSON.parse(bytes.toString('utf8')) as unknown };
      } catch (err) {
        return workerError('invalid_response', describeError(err));
      }
    }
    if (status < 400) {
      try {
        return { ok: true, value: bytes.length === 0 ? undefined : (JSON.parse(bytes.toString('utf8')) as unknown) };
      } catch {
        return { ok: true, value: undefined };
      }
    }
    return { ok: false, failure: { source: 'worker', ...errorOfResponse(status, bytes) } };
  }

  async close(): Promise<void> {
    if (this.client === undefined) return;
    const { agent } = await this.client;
    await agent.close();
  }
}

function workerError(code: WireErrorCode, message: string): InvocationOutcome {
  return { ok: false, failure: { source: 'worker', code, message } };
}

function describeError(err: unknown): string {
  const parts: string[] = [];
  let current: unknown = err;
  while (current instanceof Error && parts.length < 4) {
    parts.push(current.message);
    current = current.cause;
  }
  return parts.join(': ') || String(err);
}

/** iii reads `{error: {code, message}}` from a failed response, else `http_error` / `HTTP <status>`. */
function errorOfResponse(status: number, bytes: Buffer): { code: string; message: string } {
  try {
    const parsed = JSON.parse(bytes.toString('utf8')) as { error?: { code?: unknown; message?: unknown } };
    if (typeof parsed === 'object' && parsed !== null && typeof parsed.error === 'object' && parsed.error !== null) {
      return {
        code: typeof parsed.error.code === 'string' ? parsed.error.code : 'http_error',
        message: typeof parsed.error.message === 'string' ? parsed.error.message : 'HTTP request failed',
      };
    }
  } catch {
    // not JSON: the status says it all
  }
  return { code: 'http_error', message: `HTTP ${status}` };
}

async function readBounded(body: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of body) {
    total += chunk.length;
    if (total > MAX_RESPONSE_BYTES) throw new Error(`response larger than ${MAX_RESPONSE_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** dns.lookup for the agent's sockets that fails when a name resolves to a private address. */
function guardedLookup(hostname: string, options: object, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err !== null) {
      callback(err, []);
      return;
    }
    const list = addresses;
    if (list.some((entry) => isPrivateAddress(entry.address))) {
      callback(Object.assign(new Error(`Private IP blocked: ${hostname} resolves to a private address`), { code: 'EPRIVATE' }), []);
      return;
    }
    if ((options as { all?: boolean }).all === true) callback(null, list);
    else callback(null, list[0]?.address ?? '', list[0]?.family);
  });
}
