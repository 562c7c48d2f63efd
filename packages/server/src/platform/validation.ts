import { Ajv, type ErrorObject } from 'ajv';
import addFormatsImport from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import type { ErrorDetail } from './errors.js';

// ajv-formats ships CommonJS with a default export; under NodeNext it arrives as the module object.
const addFormats = addFormatsImport as unknown as typeof addFormatsImport.default;

function createAjv(coerceTypes: boolean | 'array'): Ajv {
  const ajv = new Ajv({ allErrors: true, coerceTypes, useDefaults: true, removeAdditional: false, strict: false });
  addFormats(ajv);
  return ajv;
}

/** The bound of a number in a query string, path or header that declares none: PostgreSQL's `integer`. */
export const DEFAULT_PARAMETER_MAX = 2 ** 31 - 1;
/** The bound of a number in a JSON body that declares none: the largest exact integer of a double. */
export const DEFAULT_BODY_MAX = Number.MAX_SAFE_INTEGER;

/**
 * A copy of `schema` in which every `integer` or `number` without a bound gets one
 * (`-max..max`): `offset=1e20` is an integer to JSON Schema, and no column or counter holds it.
 * Declared bounds are kept; `$id`s are dropped.
 *
 * @example
 * boundNumbers({ type: 'integer', minimum: 0 }, 10) // { type: 'integer', minimum: 0, maximum: 10 }
 */
export function boundNumbers(schema: unknown, max: number): unknown {
  if (Array.isArray(schema)) return schema.map((s) => boundNumbers(s, max));
  if (typeof schema !== 'object' || schema === null) return schema;
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === '$id') continue; // a copy per route: the same $id twice would clash in ajv
    copy[key] =
      key === 'const' || key === 'default' || key === 'enum' || key === 'examples' ? value : boundNumbers(value, max);
  }
  const types = [copy.type].flat();
  if (types.includes('integer') || types.includes('number')) {
    if (copy.maximum === undefined && copy.exclusiveMaximum === undefined) copy.maximum = max;
    if (copy.minimum === undefined && copy.exclusiveMinimum === undefined) copy.minimum = -max;
  }
  return copy;
}

/**
 * Bodies are validated without type coercion (a JSON string is never taken for a number);
 * query strings, path parameters and headers are coerced, since they only ever arrive as text.
 * Numbers without a declared bound are bounded ({@link boundNumbers}).
 */
export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const strict = createAjv(false);
  const coercing = createAjv('array');
  return ({ schema, httpPart }) =>
    httpPart === 'body'
      ? strict.compile(boundNumbers(schema, DEFAULT_BODY_MAX) as object)
      : coercing.compile(boundNumbers(schema, DEFAULT_PARAMETER_MAX) as object);
}

/**
 * Turns ajv errors into `details` entries with a JSON-pointer `path` to the offending field, one
 * per path. A union of constants (`anyOf` of `const`) is reported once as "must be one of ...".
 */
export function validationDetails(errors: Partial<ErrorObject>[]): ErrorDetail[] {
  const constsByPath = new Map<string, unknown[]>();
  for (const e of errors) {
    const params = (e.params ?? {}) as Record<string, unknown>;
    if (e.keyword === 'const')
      constsByPath.set(e.instancePath ?? '', [...(constsByPath.get(e.instancePath ?? '') ?? []), params.allowedValue]);
  }
  const seen = new Set<string>();
  const details = errors.map((e) => {
    const params = (e.params ?? {}) as Record<string, unknown>;
    const missing = typeof params.missingProperty === 'string' ? `/${params.missingProperty}` : '';
    const extra = typeof params.additionalProperty === 'string' ? `/${params.additionalProperty}` : '';
    let message = e.message ?? 'is invalid';
    if (extra) message = 'is not a known field';
    if (Array.isArray(params.allowedValues))
      message = `must be one of ${params.allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
    const consts = constsByPath.get(e.instancePath ?? '');
    if (consts && (e.keyword === 'const' || e.keyword === 'anyOf'))
      message = `must be one of ${consts.map((v) => JSON.stringify(v)).join(', ')}`;
    return { path: `${e.instancePath ?? ''}${missing}${extra}` || '/', message };
  });
  return details.filter((d) => {
    const key = `${d.path}\u0000${d.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
