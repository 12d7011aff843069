import type { KvUpdateOp } from '../storage/kv-store.js';
import { isPlainObject } from '../../values.js';

/**
 * Inputs of the `stream::*` functions, checked at the edge (iii's `Stream*Input` structs). A bad one
 * is refused with iii's `deserialization_error` and a message naming the field, as iii's function
 * macro does ("Failed to deserialize input for stream::set: missing field `stream_name`").
 */
export interface ItemInput {
  stream_name: string;
  group_id: string;
  item_id: string;
}
export interface SetInput extends ItemInput {
  data: unknown;
}
export interface UpdateInput extends ItemInput {
  ops: KvUpdateOp[];
}
export interface GroupInput {
  stream_name: string;
  group_id: string;
}
export interface StreamNameInput {
  stream_name: string;
}
export interface SendInput extends GroupInput {
  id: string | null;
  type: string;
  data: unknown;
}

export type Checked<T> = { ok: true; value: T } | { ok: false; message: string };

const UPDATE_OP_TYPES: ReadonlySet<string> = new Set(['set', 'merge', 'increment', 'decrement', 'append', 'remove']);

class InputError extends Error {}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a sequence';
  if (typeof value === 'object') return 'a map';
  return `${typeof value} ${JSON.stringify(value)}`;
}

function record(input: unknown): Record<string, unknown> {
  if (!isPlainObject(input)) throw new InputError(`invalid type: ${describe(input)}, expected a map`);
  return input;
}

function str(input: Record<string, unknown>, field: string): string {
  const value = input[field];
  if (value === undefined) throw new InputError(`missing field \`${field}\``);
  if (typeof value !== 'string') throw new InputError(`invalid type: ${describe(value)}, expected a string for \`${field}\``);
  return value;
}

function optionalStr(input: Record<string, unknown>, field: string): string | null {
  const value = input[field];
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw new InputError(`invalid type: ${describe(value)}, expected a string for \`${field}\``);
  return value;
}

function present(input: Record<string, unknown>, field: string): unknown {
  if (!(field in input)) throw new InputError(`missing field \`${field}\``);
  return input[field];
}

function ops(input: Record<string, unknown>): KvUpdateOp[] {
  const value = present(input, 'ops');
  if (!Array.isArray(value)) throw new InputError(`invalid type: ${describe(value)}, expected a sequence for \`ops\``);
  value.forEach((op: unknown, index) => {
    if (!isPlainObject(op) || typeof op.type !== 'string' || !UPDATE_OP_TYPES.has(op.type)) {
      throw new InputError(`ops[${index}]: expected an update op with \`type\` one of set, merge, increment, decrement, append, remove`);
    }
  });
  return value as KvUpdateOp[];
}

function check<T>(read: () => T): Checked<T> {
  try {
    return { ok: true, value: read() };
  } catch (err) {
    if (err instanceof InputError) return { ok: false, message: err.message };
    throw err;
  }
}

export const readItemInput = (input: unknown): Checked<ItemInput> =>
  check(() => {
    const r = record(input);
    return { stream_name: str(r, 'stream_name'), group_id: str(r, 'group_id'), item_id: str(r, 'item_id') };
  });

export const readSetInput = (input: unknown): Checked<SetInput> =>
  check(() => {
    const r = record(input);
    return { stream_name: str(r, 'stream_name'), group_id: str(r, 'group_id'), item_id: str(r, 'item_id'), data: present(r, 'data') };
  });

export const readUpdateInput = (input: unknown): Checked<UpdateInput> =>
  check(() => {
    const r = record(input);
    return { stream_name: str(r, 'stream_name'), group_id: str(r, 'group_id'), item_id: str(r, 'item_id'), ops: ops(r) };
  });

export const readGroupInput = (input: unknown): Checked<GroupInput> =>
  check(() => {
    const r = record(input);
    return { stream_name: str(r, 'stream_name'), group_id: str(r, 'group_id') };
  });

export const readStreamNameInput = (input: unknown): Checked<StreamNameInput> =>
  check(() => ({ stream_name: str(record(input), 'stream_name') }));

export const readSendInput = (input: unknown): Checked<SendInput> =>
  check(() => {
    const r = record(input);
    return { stream_name: str(r, 'stream_name'), group_id: str(r, 'group_id'), id: optionalStr(r, 'id'), type: str(r, 'type'), data: present(r, 'data') };
  });
