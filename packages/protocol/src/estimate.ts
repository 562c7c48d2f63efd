import { ProtocolError } from './errors.js';
import { findJobKind, type EstimateField } from './job-kinds.js';

/** The estimate inputs of a request; other properties are ignored. */
export type EstimateQuantities = Readonly<Partial<Record<EstimateField, number | undefined>>>;

/** A cost estimate in integer micro-CAD. */
export interface CostEstimate {
  /** Metering units the estimate assumes. */
  units: number;
  min_micro: number;
  max_micro: number;
  /** The budget to hold: `max_micro` plus 10 %, rounded up. */
  recommended_micro: number;
}

const FIELDS: readonly EstimateField[] = [
  'estimated_tokens',
  'estimated_duration_ms',
  'estimated_images',
  'estimated_gpu_seconds',
  'estimated_scenes',
  'estimated_runs',
  'estimated_data_gb',
];

const ceilDiv = (a: bigint, b: bigint): bigint => (a + b - 1n) / b;

/**
 * Estimates a job's cost from its kind's main input (see `JOB_KINDS`): units = the input divided
 * by `input_per_unit`, rounded up (a started second counts); cost = units times the kind's min
 * and max price, rounded up to a whole micro-CAD. A missing input takes the kind's
 * `default_input`. Throws {@link ProtocolError} on an unknown kind or an estimate field that is
 * not a non-negative integer.
 *
 * @example
 * estimateCost(3, { estimated_duration_ms: 90_500 });
 * // { units: 91, min_micro: 9_100, max_micro: 9_100, recommended_micro: 10_010 }
 */
export function estimateCost(kind: number, quantities: EstimateQuantities = {}): CostEstimate {
  const row = findJobKind(kind);
  if (row === undefined) throw new ProtocolError(`unknown job kind ${String(kind)}`, '/kind');
  for (const field of FIELDS) {
    const value = quantities[field];
    if (value !== undefined && (!Number.isSafeInteger(value) || value < 0)) {
      throw new ProtocolError(`${field} must be a non-negative integer`, `/${field}`);
    }
  }
  const input = BigInt(quantities[row.estimate_input] ?? row.default_input);
  const units = ceilDiv(input, BigInt(row.input_per_unit));
  const per = BigInt(row.price.per_units);
  const min = ceilDiv(units * BigInt(row.price.min_micro_cad), per);
  const max = ceilDiv(units * BigInt(row.price.max_micro_cad), per);
  const recommended = max + ceilDiv(max, 10n);
  if (recommended > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new ProtocolError('the estimate is too large', `/${row.estimate_input}`);
  }
  return {
    units: Number(units),
    min_micro: Number(min),
    max_micro: Number(max),
    recommended_micro: Number(recommended),
  };
}
