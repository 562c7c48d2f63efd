/**
 * Gateway routing (DESIGN.md section 10), as a pure function over the live nodes serving a model:
 * hard constraints first (`strict_jurisdiction`, `requires_tee`, nodes already tried), then the
 * nodes whose engine honours every chat field the request uses, then the soft `jurisdiction`
 * preference, then the least loaded node.
 */

import type { DirectoryCandidate } from '../nodes/directory.js';

/** A live node serving the model, with its open work count: what the node directory holds. */
export type RouteCandidate = DirectoryCandidate;

export interface RouteAsk {
  model: string;
  strict_jurisdiction?: string | undefined;
  jurisdiction?: string | undefined;
  requires_tee?: boolean | undefined;
  /** Nodes that already failed this request (failover). */
  exclude?: readonly string[];
  /** The chat fields beyond the plain ones the request uses (protocol `CHAT_FIELDS`): the node's engine must honour each. */
  fields?: readonly string[];
}

/** A choice and why it was made (recorded in the request's evidence run), or why there is none. */
export type RouteDecision =
  | { node: RouteCandidate; preferred: boolean; reason: string; candidates: number; eligible: number }
  | { refusal: string; field?: undefined }
  /** Live eligible nodes exist, but no engine among them honours `field` of the request (a 400 naming it). */
  | { refusal: string; field: string };

/**
 * Picks the node for a request, or says why none may take it (the 503 message).
 * Ties between equally loaded nodes are broken by `random`, so load spreads.
 *
 * @example
 * chooseNode([{ id: 'n1', country: 'US', open_work: 0, ... }], { model: 'tinyllama', strict_jurisdiction: 'CA' });
 * // { refusal: 'no live node serves tinyllama in CA' }
 */
export function chooseNode(
  candidates: readonly RouteCandidate[],
  ask: RouteAsk,
  random: () => number = Math.random,
): RouteDecision {
  const exclude = new Set(ask.exclude ?? []);
  const placed = candidates.filter(
    (n) =>
      (ask.strict_jurisdiction === undefined || n.country === ask.strict_jurisdiction) &&
      (!ask.requires_tee || n.attestation_verified) &&
      !exclude.has(n.id),
  );
  if (placed.length === 0) return { refusal: refusalOf(candidates, ask, exclude) };
  const fields = ask.fields ?? [];
  const eligible = fields.length === 0 ? placed : placed.filter((n) => fields.every((f) => n.chat_fields.includes(f)));
  if (eligible.length === 0) return unhonoured(placed, fields, ask.model);
  const preferred = ask.jurisdiction === undefined ? [] : eligible.filter((n) => n.country === ask.jurisdiction);
  const pool = preferred.length > 0 ? preferred : eligible;
  const least = Math.min(...pool.map((n) => n.open_work));
  const lightest = pool.filter((n) => n.open_work === least);
  const node = lightest[Math.min(lightest.length - 1, Math.floor(random() * lightest.length))] ?? lightest[0];
  if (!node) return { refusal: refusalOf(candidates, ask, exclude) };
  const hard = [
    ask.strict_jurisdiction && `in ${ask.strict_jurisdiction} (strict_jurisdiction)`,
    ask.requires_tee && 'with a verified TEE',
    exclude.size > 0 && `not already tried (${exclude.size})`,
    fields.length > 0 && `honouring ${fields.join(', ')}`,
  ].filter(Boolean);
  const soft =
    ask.jurisdiction === undefined
      ? ''
      : preferred.length > 0
        ? `, in ${ask.jurisdiction} as preferred`
        : `; none in the preferred ${ask.jurisdiction}, so any eligible node`;
  const reason = `least loaded (${least} open) of ${pool.length} node(s)${soft}; ${eligible.length} of ${candidates.length} live node(s) serving ${ask.model} were eligible${hard.length ? ` (${hard.join(', ')})` : ''}`;
  return { node, preferred: preferred.length > 0, reason, candidates: candidates.length, eligible: eligible.length };
}

function refusalOf(candidates: readonly RouteCandidate[], ask: RouteAsk, exclude: ReadonlySet<string>): string {
  const where = ask.strict_jurisdiction === undefined ? '' : ` in ${ask.strict_jurisdiction}`;
  const tee = ask.requires_tee ? ' with a verified TEE (requires_tee)' : '';
  const other = exclude.size > 0 && candidates.some((n) => exclude.has(n.id)) ? 'other ' : '';
  return `no ${other}live node serves ${ask.model}${where}${tee}`;
}

/**
 * The refusal when nodes are eligible but none honours every field the request uses: names the
 * first field no eligible node honours, else the first the most capable one lacks.
 */
function unhonoured(placed: readonly RouteCandidate[], fields: readonly string[], model: string): RouteDecision {
  const honoured = (n: RouteCandidate) => fields.filter((f) => n.chat_fields.includes(f)).length;
  const best = placed.reduce((a, b) => (honoured(b) > honoured(a) ? b : a));
  const field =
    fields.find((f) => !placed.some((n) => n.chat_fields.includes(f))) ??
    fields.find((f) => !best.chat_fields.includes(f)) ??
    '';
  return {
    refusal: `${field} is not supported by the engine of any live node serving ${model}; send the request without it`,
    field,
  };
}
