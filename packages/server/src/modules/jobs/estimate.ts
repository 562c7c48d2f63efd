import {
  estimateCost,
  findJobKind,
  JOB_KINDS,
  microToCad,
  microToCents,
  type EstimateField,
  type EstimateQuantities,
} from '@svc/protocol';
import { ApiError } from '../../platform/errors.js';
import { estimateTokens } from '../gateway/pricing.js';

/**
 * A job's estimate (DESIGN.md section 8, issue 41 point 6), as one pure function of its fields
 * and of what the server counted in its inputs: `POST /api/v1/marketplace/estimate` and the
 * submission (`estimated_cost`, and the budget it must cover) both answer with it, so the same
 * fields give the same figure on both routes.
 */

/** What the server counted in a job's inputs (`inline_text` or `payload_url`). */
export interface CountedInputs {
  /** Kinds 1, 2 and 4: the non-empty lines, one input each. */
  inputs?: readonly string[];
  /** Kind 3: the audio's duration as the server measured it (platform/audio.ts). */
  audioMs?: number;
}

/**
 * The quantity of the kind's main input the estimate reads. Counts replace or raise what the
 * request says: kind 3's measured audio and kind 4's prompts (one image each) are what the job
 * meters, so they replace `estimated_duration_ms` and `estimated_images`; kinds 1 and 2's prompt
 * tokens are a floor (a chat's answer adds to it), so the larger of the field (or its default)
 * and the count is taken.
 */
function quantityOf(kind: number, field: EstimateField, fields: EstimateQuantities, counted: CountedInputs) {
  const given = fields[field];
  const inputs = counted.inputs;
  if (kind === 3 && counted.audioMs !== undefined) return counted.audioMs;
  if (kind === 4 && inputs) return inputs.length;
  if ((kind === 1 || kind === 2) && inputs) {
    const row = findJobKind(kind);
    const tokens = inputs.reduce((sum, text) => sum + estimateTokens(text), 0);
    return Math.max(given ?? row?.default_input ?? 0, tokens);
  }
  return given;
}

/** The estimate both routes answer (EstimateResponse), and its exact maximum in micro-CAD. */
export interface JobEstimate {
  kind: number;
  unit: string;
  units: number;
  min_cost: number;
  max_cost: number;
  recommended_budget: number;
  min_cost_cents: number;
  max_cost_cents: number;
  recommended_cents: number;
  currency: 'CAD';
  /** `max_cost` in integer micro-CAD: the submission's `estimated_cost`, the cost its budget must cover. */
  max_micro: number;
}

/**
 * The estimate of a job of `kind` from its estimate fields and its counted inputs. 400 on an
 * unknown kind or a quantity that is not a non-negative integer.
 *
 * @example
 * jobEstimate(4, {}, { inputs: Array(250).fill('a fox') }).max_cost; // 7.5 (250 images x 0.03 CAD)
 * jobEstimate(3, { estimated_duration_ms: 60_000 }, { audioMs: 2_500 }).units; // 3 (the measured audio)
 */
export function jobEstimate(kind: number, fields: EstimateQuantities, counted: CountedInputs = {}): JobEstimate {
  const row = findJobKind(kind);
  if (!row)
    throw new ApiError('invalid_request', `kind must be one of ${JOB_KINDS.map((k) => k.kind).join(', ')}`, [
      { path: '/kind', message: 'unknown job kind' },
    ]);
  const quantity = quantityOf(kind, row.estimate_input, fields, counted);
  const e = estimateCost(kind, { ...fields, [row.estimate_input]: quantity });
  return {
    kind,
    unit: row.unit,
    units: e.units,
    min_cost: microToCad(e.min_micro),
    max_cost: microToCad(e.max_micro),
    recommended_budget: microToCad(e.recommended_micro),
    min_cost_cents: microToCents(e.min_micro),
    max_cost_cents: microToCents(e.max_micro),
    recommended_cents: microToCents(e.recommended_micro),
    currency: 'CAD',
    max_micro: e.max_micro,
  };
}
