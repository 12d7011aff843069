import type { WireErrorCode } from '../errors.js';
import type { EngineFunctionResult } from '../workers/engine-functions.js';
import { isPlainObject } from '../values.js';

/**
 * Reading a module function's input the way iii's engine deserializes it (serde): a missing field or
 * one of the wrong type fails the call with `deserialization_error` and a message naming the field.
 */
export class InputError extends Error {}

function kind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a sequence';
  if (typeof value === 'object') return 'a map';
  if (typeof value === 'number') return Number.isInteger(value) ? `integer \`${value}\`` : `floating point \`${value}\``;
  if (typeof value === 'string') return `string ${JSON.stringify(value)}`;
  return typeof value === 'boolean' ? `boolean \`${value}\`` : typeof value;
}

/** The input as an object (iii: `invalid type: …, expected struct …`). */
export function inputObject(data: unknown): Record<string, unknown> {
  if (isPlainObject(data)) return data;
  throw new InputError(`invalid type: ${kind(data ?? null)}, expected a map`);
}

export function requiredString(input: Record<string, unknown>, field: string): string {
  const value = input[field];
  if (value === undefined) throw new InputError(`missing field \`${field}\``);
  if (typeof value !== 'string') throw new InputError(`invalid type: ${kind(value)}, expected a string`);
  return value;
}

export function optionalString(input: Record<string, unknown>, field: string): string | undefined {
  const value = input[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new InputError(`invalid type: ${kind(value)}, expected a string`);
  return value;
}

/** A JSON value that must be present (it may be null). */
export function requiredValue(input: Record<string, unknown>, field: string, alias?: string): unknown {
  if (Object.hasOwn(input, field)) return input[field];
  if (alias !== undefined && Object.hasOwn(input, alias)) return input[alias];
  throw new InputError(`missing field \`${field}\``);
}

/** Runs a module function: an InputError answers iii's `deserialization_error`. */
export async function moduleCall(functionId: string, body: () => Promise<EngineFunctionResult> | EngineFunctionResult): Promise<EngineFunctionResult> {
  try {
    return await body();
  } catch (err) {
    if (err instanceof InputError) return failure('deserialization_error', `Failed to deserialize input for ${functionId}: ${err.message}`);
    throw err;
  }
}

export function failure(code: WireErrorCode, message: string): EngineFunctionResult {
  return { ok: false, error: { code, message } };
}

export function success(value: unknown): EngineFunctionResult {
  return { ok: true, value };
}
