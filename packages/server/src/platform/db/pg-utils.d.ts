/** The part of node-postgres's `lib/utils` (typed nowhere) that the PGlite store calls. */
declare module 'pg/lib/utils.js' {
  /** A JavaScript value as node-postgres sends it as a parameter: text, or a Buffer for bytea; null for null and undefined. */
  export function prepareValue(value: unknown): string | Buffer | null;
}
