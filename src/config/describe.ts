import { z } from 'zod';
import {
  MODULE_CLASSES,
  MODULE_NAMES,
  adminModuleSchema,
  clusterModuleSchema,
  httpFunctionsModuleSchema,
  observabilityModuleSchema,
  restApiModuleSchema,
  topLevelSchema,
  workerModuleSchema,
} from './schema.js';
import { cronModuleSchema } from './modules/cron-schema.js';
import { pubsubModuleSchema } from './modules/pubsub-schema.js';
import { stateModuleSchema } from './modules/state-schema.js';
import { streamModuleSchema } from './modules/stream-schema.js';
import { isPlainObject } from '../values.js';

/**
 * The configuration reference, derived from the schemas so the README cannot drift from what the
 * loader accepts: the JSON Schema that zod produces carries types, bounds, defaults and descriptions.
 */

export interface ConfigKeyDescription {
  module: string;
  key: string;
  type: string;
  default: string;
  description: string;
}

export const TOP_LEVEL = '(top level)';

type JsonSchema = z.core.JSONSchema.JSONSchema;

/** The module pages in docs/ holding their module's generated reference between `<!-- <marker>:start/end -->`. */
export const MODULE_PAGES: readonly { page: string; module: string; marker: string }[] = [
  { page: 'state.md', module: 'iii-state', marker: 'state-config' },
  { page: 'stream.md', module: 'iii-stream', marker: 'stream-config' },
  { page: 'pubsub.md', module: 'iii-pubsub', marker: 'pubsub-config' },
  { page: 'cron.md', module: 'iii-cron', marker: 'cron-config' },
];

// Documentation order: the module most people configure first, Switchyard's own ones after iii's.
// `module` is the name in the `workers:` form; `moduleClass` the older `modules:` form's class, if any.
const SECTIONS: readonly { module: string; moduleClass?: string; schema: z.ZodType }[] = [
  { module: TOP_LEVEL, schema: topLevelSchema },
  { module: MODULE_NAMES.api, moduleClass: MODULE_CLASSES.api, schema: restApiModuleSchema },
  { module: MODULE_NAMES.workers, moduleClass: MODULE_CLASSES.workers, schema: workerModuleSchema },
  { module: MODULE_NAMES.httpFunctions, schema: httpFunctionsModuleSchema },
  { module: MODULE_NAMES.observability, schema: observabilityModuleSchema },
  { module: 'iii-state', schema: stateModuleSchema },
  { module: 'iii-stream', schema: streamModuleSchema },
  { module: 'iii-pubsub', schema: pubsubModuleSchema },
  { module: 'iii-cron', schema: cronModuleSchema },
  { module: MODULE_NAMES.admin, moduleClass: MODULE_CLASSES.admin, schema: adminModuleSchema },
  { module: MODULE_NAMES.cluster, moduleClass: MODULE_CLASSES.cluster, schema: clusterModuleSchema },
];

function toJsonSchema(schema: z.ZodType): JsonSchema {
  // Input side: a key with a default is optional to the person writing the file.
  return z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' });
}

function asSchema(value: unknown): JsonSchema | undefined {
  return isPlainObject(value) ? value : undefined;
}

function range(schema: JsonSchema): string {
  // zod bounds every integer to the safe range; only bounds a person chose are worth printing.
  const min = schema.minimum !== undefined && schema.minimum > Number.MIN_SAFE_INTEGER ? schema.minimum : undefined;
  const max = schema.maximum !== undefined && schema.maximum < Number.MAX_SAFE_INTEGER ? schema.maximum : undefined;
  if (min !== undefined && max !== undefined) return ` ${min}–${max}`;
  if (min !== undefined) return ` ≥ ${min}`;
  if (max !== undefined) return ` ≤ ${max}`;
  return '';
}

function typeOf(schema: JsonSchema): string {
  if (schema.enum !== undefined) return schema.enum.map(String).join(' | ');
  switch (schema.type) {
    case 'integer':
      return `integer${range(schema)}`;
    case 'number':
      return `number${range(schema)}`;
    case 'array': {
      const items = asSchema(schema.items);
      return items === undefined ? 'list' : `${typeOf(items)}[]`;
    }
    case undefined:
      return 'any';
    default:
      return Array.isArray(schema.type) ? schema.type.join(' | ') : schema.type;
  }
}

const REQUIRED = '(required)';
const UNSET = '(unset)';

function defaultOf(schema: JsonSchema, required: boolean): string {
  if ('default' in schema) return typeof schema.default === 'string' ? schema.default : JSON.stringify(schema.default);
  return required ? REQUIRED : UNSET;
}

/** The variants of a `{ name, config }` union (the modules' `adapter`), by their `name` constant; undefined otherwise. */
function namedVariants(schema: JsonSchema): { name: string; schema: JsonSchema }[] | undefined {
  const options = schema.oneOf ?? schema.anyOf;
  if (!Array.isArray(options) || options.length === 0) return undefined;
  const variants: { name: string; schema: JsonSchema }[] = [];
  for (const option of options) {
    const variant = asSchema(option);
    const name = asSchema(variant?.properties?.name)?.const;
    if (variant === undefined || typeof name !== 'string') return undefined;
    variants.push({ name, schema: variant });
  }
  return variants;
}

/**
 * A `{ name, config }` union: one row for `name` (its values and what each means), then each
 * variant's other keys, their descriptions starting with the variant they belong to.
 */
function describeVariants(module: string, variants: { name: string; schema: JsonSchema }[], path: string, rows: ConfigKeyDescription[]): void {
  rows.push({
    module,
    key: `${path}.name`,
    type: variants.map((v) => v.name).join(' | '),
    default: REQUIRED,
    description: variants.map((v) => `\`${v.name}\`: ${asSchema(v.schema.properties?.name)?.description ?? ''}`).join('; '),
  });
  for (const { name, schema } of variants) {
    const own: JsonSchema = { ...schema, properties: Object.fromEntries(Object.entries(schema.properties ?? {}).filter(([key]) => key !== 'name')) };
    describeObject(module, own, `${path}.`, rows, `With \`${name}\`: `);
  }
}

function describeObject(module: string, schema: JsonSchema, prefix: string, rows: ConfigKeyDescription[], label = ''): void {
  const required = new Set(schema.required ?? []);
  for (const [key, value] of Object.entries(schema.properties ?? {})) {
    const property = asSchema(value);
    if (property === undefined) continue;
    const path = `${prefix}${key}`;
    const variants = namedVariants(property);
    rows.push({
      module,
      key: path,
      type: variants === undefined ? typeOf(property) : 'object',
      default: defaultOf(property, required.has(key)),
      description: `${label}${property.description ?? ''}`,
    });
    if (variants !== undefined) describeVariants(module, variants, path, rows);
    // A `config` with no keys of its own (pubsub's `local`) adds nothing beyond its row.
    if (property.type === 'object' && property.properties !== undefined) describeObject(module, property, `${path}.`, rows, label);
    const items = property.type === 'array' ? asSchema(property.items) : undefined;
    if (items?.type === 'object' && items.properties !== undefined) describeObject(module, items, `${path}[].`, rows, label);
  }
}

/** One row per key (nested keys as `cors.allowed_origins`, list items as `middleware[].phase`). */
export function describeConfig(): ConfigKeyDescription[] {
  const rows: ConfigKeyDescription[] = [];
  for (const { module, schema } of SECTIONS) describeObject(module, toJsonSchema(schema), '', rows);
  return rows;
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');
}

function code(text: string): string {
  return text === REQUIRED || text === UNSET ? text : `\`${text}\``;
}

/**
 * The README's configuration reference: one table per module, in the order a reader needs them; or,
 * given module names, only theirs (a module's own page, e.g. docs/stream.md).
 */
export function renderConfigReference(only?: readonly string[]): string {
  const rows = describeConfig();
  const sections = SECTIONS.filter(({ module }) => only === undefined || only.includes(module)).map(({ module, moduleClass, schema }) => {
    const title = module === TOP_LEVEL ? 'Top level' : `\`${module}\`${moduleClass === undefined ? '' : ` (class \`${moduleClass}\`)`}`;
    const intro = toJsonSchema(schema).description;
    const table = rows
      .filter((row) => row.module === module)
      .map((row) => `| \`${row.key}\` | ${cell(row.type)} | ${cell(code(row.default))} | ${cell(row.description)} |`);
    return [
      `### ${title}`,
      '',
      ...(intro === undefined ? [] : [cell(intro) + '.', '']),
      '| Key | Type | Default | Description |',
      '|---|---|---|---|',
      ...table,
    ].join('\n');
  });
  return sections.join('\n\n') + '\n';
}
