/**
 * What matching needs of a node (DESIGN.md section 8): the part of its row the scheduler's rules
 * (jobs/matching.ts) read, and what the poll waiters (work/waiters.ts) keep of a waiting node. Here,
 * with the node row, so that both can use it without depending on each other.
 */
export interface MatchNode {
  country: string | null;
  region: string | null;
  attestation_verified: boolean;
  green: boolean;
  reputation: number;
  capabilities: string[];
  gpu_model: string | null;
  cpu_cores: number;
  ram_bytes: number;
  vram_bytes: number;
  models: string[];
  price_micro_per_unit: Record<string, number>;
}
