// Plain data, no TypeBox: the dashboard's job filter imports it without the schema builder.

/**
 * A marketplace job's states (the server's `jobs/states.ts` moves between them).
 *
 * @example
 * JOB_STATUSES.includes('running') // true
 */
export const JOB_STATUSES = [
  'submitted',
  'pending',
  'assigned',
  'running',
  'completed',
  'failed',
  'cancelled',
] as const;
