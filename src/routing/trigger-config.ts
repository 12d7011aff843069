import type { MiddlewarePhase } from '../config/types.js';
import { MIDDLEWARE_PHASES } from '../config/types.js';
import type { PathPattern } from './path-pattern.js';
import { normalizeApiPath, parsePathPattern } from './path-pattern.js';
import { HTTP_TOKEN, isPlainObject } from '../values.js';

/** The two trigger types the HTTP module adds (http-module.md §6), validated at registration. */
export interface HttpTriggerConfig {
  /** `api_path` exactly as the worker sent it: the request's `trigger.path` (as iii gives it). */
  apiPath: string;
  /** Parsed from `api_path` read as iii reads it (normalizeApiPath): what the router matches. */
  pattern: PathPattern;
  httpMethod: string;
  /**
   * The route slot this binding competes for: method and path shape (`GET /users/:`). Kept here, made
   * once with the record, because the table asks for it on every change that touches the binding.
   */
  routeKey: string;
  conditionFunctionId?: string;
  middlewareFunctionIds?: readonly string[];
}

export interface MiddlewareTriggerConfig {
  phase: MiddlewarePhase;
  /** Scope prefix as registered; undefined = every request. */
  scopePath?: string;
  priority: number;
}

export { MIDDLEWARE_PHASES };

export type TriggerSpec =
  | { type: 'http'; http: HttpTriggerConfig }
  | { type: 'http_middleware'; middleware: MiddlewareTriggerConfig };

export type TriggerValidation =
  | { ok: true; spec: TriggerSpec }
  | { ok: false; code: 'trigger_type_not_found' | 'invalid_trigger_config'; message: string };

const TOKEN = HTTP_TOKEN;

const invalid = (message: string): TriggerValidation => ({ ok: false, code: 'invalid_trigger_config', message });

const isObject = isPlainObject;

function validateHttp(config: Record<string, unknown>, ignoreTrailingSlash: boolean): TriggerValidation {
  const { api_path: apiPath } = config;
  if (typeof apiPath !== 'string' || apiPath.length === 0) return invalid('http trigger needs config.api_path');
  // No http_method serves GET, as iii reads the config (docs/http.md#routes).
  const httpMethod = config.http_method ?? 'GET';
  if (typeof httpMethod !== 'string' || httpMethod.length === 0) return invalid('http trigger needs config.http_method');
  if (!TOKEN.test(httpMethod)) return invalid(`http_method "${httpMethod}" is not a valid HTTP method`);
  const parsed = parsePathPattern(normalizeApiPath(apiPath), ignoreTrailingSlash);
  if (!parsed.ok) return invalid(parsed.message);
  const method = httpMethod.toUpperCase();
  const http: HttpTriggerConfig = { apiPath, pattern: parsed.pattern, httpMethod: method, routeKey: `${method} ${parsed.pattern.shapeKey}` };
  const condition = config.condition_function_id;
  if (condition !== undefined && condition !== null) {
    if (typeof condition !== 'string' || condition.length === 0) {
      return invalid('condition_function_id must be a non-empty string');
    }
    http.conditionFunctionId = condition;
  }
  const middlewareIds = config.middleware_function_ids;
  if (middlewareIds !== undefined && middlewareIds !== null) {
    if (!Array.isArray(middlewareIds) || !middlewareIds.every((id) => typeof id === 'string' && id.length > 0)) {
      return invalid('middleware_function_ids must be an array of non-empty strings');
    }
    http.middlewareFunctionIds = middlewareIds as string[];
  }
  return { ok: true, spec: { type: 'http', http } };
}

function validateMiddleware(config: Record<string, unknown>, ignoreTrailingSlash: boolean): TriggerValidation {
  const { phase, scope, priority } = config;
  if (typeof phase !== 'string' || !(MIDDLEWARE_PHASES as readonly string[]).includes(phase)) {
    return invalid(`http_middleware config.phase must be one of ${MIDDLEWARE_PHASES.join(', ')}`);
  }
  const middleware: MiddlewareTriggerConfig = { phase: phase as MiddlewarePhase, priority: 0 };
  if (priority !== undefined && priority !== null) {
    if (typeof priority !== 'number' || !Number.isFinite(priority)) {
      return invalid('http_middleware config.priority must be a finite number');
    }
    middleware.priority = priority;
  }
  if (scope !== undefined && scope !== null) {
    if (!isObject(scope) || typeof scope.path !== 'string') {
      return invalid('http_middleware config.scope must be an object with a string "path"');
    }
    const scopePath = scope.path;
    // A scope is a path pattern plus an optional trailing `/*`; validate the pattern part the same way.
    const patternPart = scopePath.endsWith('/*') ? scopePath.slice(0, -2) || '/' : scopePath;
    const parsed = parsePathPattern(patternPart, ignoreTrailingSlash);
    if (!parsed.ok) return invalid(`http_middleware scope.path: ${parsed.message}`);
    middleware.scopePath = scopePath;
  }
  return { ok: true, spec: { type: 'http_middleware', middleware } };
}

/**
 * A trigger config as a worker sent it, with its scope path normalized as iii does (normalizeApiPath)
 * for an http_middleware trigger. An http trigger's `api_path` stays as sent (the request's
 * `trigger.path` is the pattern as registered); validateTrigger reads it normalized. Other values are
 * left for validateTrigger to judge.
 */
export function normalizeTriggerPaths(triggerType: string, config: Record<string, unknown>): Record<string, unknown> {
  if (triggerType === 'http_middleware' && isObject(config.scope) && typeof config.scope.path === 'string') {
    return { ...config, scope: { ...config.scope, path: normalizeApiPath(config.scope.path) } };
  }
  return config;
}

export function validateTrigger(
  triggerType: string,
  config: Record<string, unknown>,
  ignoreTrailingSlash: boolean,
): TriggerValidation {
  switch (triggerType) {
    case 'http':
      return validateHttp(config, ignoreTrailingSlash);
    case 'http_middleware':
      return validateMiddleware(config, ignoreTrailingSlash);
    default:
      return { ok: false, code: 'trigger_type_not_found', message: `trigger type "${triggerType}" is not supported` };
  }
}
