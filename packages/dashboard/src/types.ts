/** The parts of the API's answers the dashboard reads (docs/ and GET /openapi.json have them all). */

import type { StoredReceipt } from '@svc/protocol';

export type Role = 'owner' | 'admin' | 'member';

export interface AuthResponse {
  api_key?: string;
  buyer_id: string;
  email: string;
  name: string;
  token: string;
  organization: { id: string; name: string; created_at: string; role: Role };
}

export interface ApiKeyRecord {
  key_id: string;
  prefix: string;
  label: string;
  buyer_id: string;
  scopes: string[];
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  revoked_reason: string | null;
}

export interface Member {
  buyer_id: string;
  email: string;
  name: string;
  created_at: string;
  role: Role;
}

export interface InviteResponse {
  email: string;
  role: 'admin' | 'member';
  accept_url: string;
  expires_at: string;
}

export interface Balance {
  balance_cents: number;
  held_cents: number;
  available_cents: number;
  free_tier_granted_cents: number;
}

export interface Transaction {
  id: string;
  tx_type: string;
  amount_cents: number;
  balance_after: number;
  description: string;
  ref: string | null;
  created_at: string;
}

export interface SpendSeries {
  days: number;
  series: { date: string; spend_cents: number; credit_cents: number }[];
  total_spend_cents: number;
}

export interface Job {
  id: string;
  kind: number;
  job_type: string;
  status: string;
  model: string | null;
  budget_cents: number;
  estimated_cost_cents: number;
  execution_pool: string;
  strict_jurisdiction: string;
  required_region: string;
  policy_note: string;
  attempts: number;
  node_id: string | null;
  charged_cents: number | null;
  result_hash: string | null;
  failure_reason: string | null;
  created_at: string;
  submitted_at: string;
  assigned_at: string | null;
  completed_at: string | null;
}

export interface JobAudit {
  events: { at: string; type: string; details: Record<string, unknown> }[];
  credit_ledger: Transaction[];
}

/** A stored receipt: the protocol's one shape (type-only import: no runtime code in the bundle). */
export type Receipt = StoredReceipt;

export interface GatewayRequest {
  id: string;
  type: string;
  model: string;
  status: string;
  stream: boolean;
  node_id: string | null;
  country: string | null;
  receipt_id: string | null;
  charged_cents: number | null;
  created_at: string;
  completed_at: string | null;
}

export interface NodeSummary {
  node_id: string;
  name: string;
  status: string;
  availability: string;
  gpu_model: string;
  cpu_cores: number;
  ram_gb: number;
  vram_gb: number;
  region: string;
  country: string;
  models: string[];
  load: number;
  last_seen: number;
}

export interface NodeEarnings {
  total_cents: number;
  nodes: { node_id: string; earned_cents: number; work_items: number }[];
}

export interface InferenceHealth {
  chat_models_in_catalog: number;
  chat_models_with_capacity: number;
  online_nodes_heartbeat_5m: number;
  registered_nodes: number;
}

export interface Sla {
  window_hours: number;
  window_since: string;
  generated_at: string;
  totals: Record<string, number>;
  assignment: {
    samples: number;
    p50_latency_ms: number;
    p95_latency_ms: number;
    target_p95_ms: number;
    meets_target: boolean;
    insufficient_sample: boolean;
  };
  completion: {
    in_flight_jobs: number;
    terminal_jobs_considered: number;
    success_rate: number;
    target_success_rate: number;
    meets_target: boolean;
    insufficient_sample: boolean;
  };
}

export interface Model {
  id: string;
  type: string;
  context_length?: number;
}

export interface ServiceConfig {
  public_url: string;
}

/** `GET /api/v1/downloads`, the part the Nodes page shows (server: modules/system/download-schemas.ts). */
export interface DownloadsInfo {
  version: string;
  agent: { status: 'ready' | 'building' | 'unavailable'; url: string; sha256?: string; reason?: string };
}

export interface EvidenceEvent {
  id: string;
  run_id: string;
  sequence: number;
  event_type: string;
  subject_id: string;
  summary: string;
  metadata: Record<string, unknown>;
  created_at: string;
  event_hash: string;
}

export interface EvidenceGraph {
  run: { id: string; job_id: string; status: string; root_hash: string; signed_at?: string | null };
  events: EvidenceEvent[];
  edges: { run_id: string; from_event_id: string; to_event_id: string; edge_type: string }[];
  certificate: {
    algorithm: string;
    version: string;
    root_hash: string;
    signature_hex: string;
    signer_public_key_hex: string;
    signed: boolean;
    verified: boolean;
    signed_at?: string | null;
    note?: string;
  };
}

export interface PlatformKey {
  key_id: string;
  public_key_hex: string;
  valid_from: string;
  valid_until: string | null;
  active: boolean;
}

export interface PayoutAccountStatus {
  account_id: string | null;
  onboarded: boolean;
  provider: string;
  moves_real_money: boolean;
}

export interface Payout {
  id: string;
  amount_cents: number;
  status: 'pending' | 'paid' | 'failed';
  period_start: string;
  period_end: string;
  provider_ref: string | null;
  failure_reason: string | null;
  created_at: string;
}

export interface PayoutList {
  payouts: Payout[];
  total: number;
  payable_cents: number;
  minimum_cents: number;
  provider: string;
  moves_real_money: boolean;
}

export interface Topup {
  topup_id: string;
  amount_cents: number;
  status: 'pending' | 'paid' | 'failed';
  checkout_url: string;
  provider: string;
  failure_reason: string | null;
  created_at: string;
}
