import { Type, type TSchema } from '@sinclair/typebox';

/**
 * Schema pieces the REST shapes share. This folder is the browser-safe `@svc/protocol/rest` entry:
 * it imports TypeBox and nothing else (no Node.js built-ins), so the dashboard's bundle can hold it.
 */

/**
 * A string enum that validates as `enum` (one clear error) and documents as one.
 *
 * @example
 * const Status = StringEnum(['open', 'closed'] as const, { description: 'the state' });
 */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  options: { description?: string; default?: T[number] } = {},
) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

/** An ISO 8601 instant. */
export const DateTime = Type.String({ format: 'date-time' });

/**
 * The schema, or JSON null.
 *
 * @example
 * const NodeId = Nullable(Type.String()); // string | null
 */
export const Nullable = <T extends TSchema>(schema: T, options: { description?: string } = {}) =>
  Type.Union([schema, Type.Null()], options);

/**
 * An open JSON object whose static type is `Record<string, unknown>` (TypeBox types `Type.Object({})` as `{}`).
 *
 * @example
 * const Details = OpenObject({ description: 'what the event carries' });
 */
export const OpenObject = (options: { description?: string } = {}) =>
  Type.Unsafe<Record<string, unknown>>(Type.Object({}, { additionalProperties: true, ...options }));
