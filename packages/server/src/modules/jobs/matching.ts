import { findJobKind } from '@svc/protocol';
import type { MatchNode } from '../nodes/match-node.js';

/** What matching needs of a node: defined with the node row (nodes/match-node.ts). */
export type { MatchNode };

/** What matching needs of a job (DESIGN.md section 8). Pure data. */
export interface MatchJob {
  kind: number;
  execution_pool: 'public' | 'sovereign';
  model: string | null;
  strict_jurisdiction: string | null;
  region: string | null;
  green_only: boolean;
  min_reputation: number | null;
  required_capabilities: string[];
  /** Kinds 5-7: the container image the job names (only a node holding it, `image:<ref>`, takes it). */
  image?: string | null;
  /** Kinds 5-8 and 10: `egress` goes only to a node granting jobs a network (`network:egress`). */
  network?: 'egress' | null;
  max_price_micro_per_unit: number;
}

const GB = 2 ** 30;

/** The catalogue's lowest price per single unit of a kind, in micro-CAD (tokens are priced per 1,000). */
export function floorPriceMicroPerUnit(kind: number): number {
  const k = findJobKind(kind);
  return k ? k.price.min_micro_cad / k.price.per_units : 0;
}

/** What the node asks per unit of this kind: its own price, else the catalogue floor. */
export function askingPrice(node: Pick<MatchNode, 'price_micro_per_unit'>, kind: number): number {
  return node.price_micro_per_unit[String(kind)] ?? floorPriceMicroPerUnit(kind);
}

/** Checks one `required_capabilities` entry; undefined when the entry is not understood. */
export function capabilityMet(node: MatchNode, capability: string): boolean | undefined {
  const [name, value] = capability.split(':', 2);
  const n = Number(value);
  switch (name) {
    case 'cpu':
      return value === undefined ? true : undefined;
    case 'gpu':
      return value === undefined ? node.gpu_model !== null : undefined;
    case 'process':
      return value === undefined ? node.capabilities.includes('process') : undefined;
    case 'capsule':
      return value === undefined ? node.capabilities.includes('capsule') : undefined;
    case 'min_cpu_cores':
      return Number.isFinite(n) ? node.cpu_cores >= n : undefined;
    case 'min_ram_gb':
      return Number.isFinite(n) ? node.ram_bytes >= n * GB : undefined;
    case 'min_vram_gb':
      return Number.isFinite(n) ? node.vram_bytes >= n * GB : undefined;
    case 'model':
      return value ? node.models.includes(value) : undefined;
    default:
      return undefined;
  }
}

/**
 * Buyer code (kinds 5-7) runs in the node's `oci` runner or its opt-in `process` runner; a job
 * naming an image needs a node holding it (`image:<ref>`, podman's `localhost/` prefix allowed).
 */
function runnerUnmet(image: string | null, capabilities: readonly string[]): string | undefined {
  if (image !== null) {
    const held = capabilities.includes(`image:${image}`) || capabilities.includes(`image:localhost/${image}`);
    return held ? undefined : `image ${image}`;
  }
  return capabilities.includes('runner:oci') || capabilities.includes('process') ? undefined : 'runner for buyer code';
}

/**
 * The first constraint the node fails for the job, as a short phrase for logs and 503 messages;
 * undefined when the node may take the job. Every constraint is hard.
 *
 * @example
 * unmetConstraint(job, node) // 'strict_jurisdiction CA (node is in US)'
 */
export function unmetConstraint(job: MatchJob, node: MatchNode): string | undefined {
  if (job.strict_jurisdiction !== null && node.country !== job.strict_jurisdiction) {
    return `strict_jurisdiction ${job.strict_jurisdiction} (node is in ${node.country ?? 'an undeclared country'})`;
  }
  if (job.execution_pool === 'sovereign' && !node.attestation_verified)
    return 'sovereign pool (node attestation not verified)';
  if (job.region !== null && node.region !== job.region) return `region ${job.region}`;
  if (job.green_only && !node.green) return 'green_only';
  if (job.min_reputation !== null && node.reputation < job.min_reputation)
    return `min_reputation ${job.min_reputation}`;
  if (job.model !== null && !node.models.includes(job.model)) return `model ${job.model}`;
  if (job.kind === 5 || job.kind === 6 || job.kind === 7) {
    const why = runnerUnmet(job.image ?? null, node.capabilities);
    if (why) return why;
  }
  if (job.network === 'egress' && !node.capabilities.includes('network:egress')) return 'network egress';
  if ((job.kind === 6 || job.kind === 7) && node.gpu_model === null) return 'gpu';
  if (job.kind === 9 && !node.capabilities.includes('capsule')) return 'repository capsule';
  // Kinds 8 and 10 run the program the operator set for the kind (`svc node --runner 8=CMD`).
  if ((job.kind === 8 || job.kind === 10) && !node.capabilities.includes(`runner:${job.kind}`))
    return `runner for kind ${job.kind}`;
  for (const capability of job.required_capabilities) {
    if (capabilityMet(node, capability) !== true) return `capability ${capability}`;
  }
  if (askingPrice(node, job.kind) > job.max_price_micro_per_unit) return 'max_price_per_unit';
  return undefined;
}
