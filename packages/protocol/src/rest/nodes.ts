import { Type } from '@sinclair/typebox';

/** A node as `GET /api/v1/nodes` lists it. */
export const NodeSummarySchema = Type.Object(
  {
    node_id: Type.String(),
    pubkey: Type.String(),
    name: Type.String(),
    status: Type.String({ description: '`online` when seen in the last 30 s, else `offline`' }),
    availability: Type.String({ description: '`available` or `busy`' }),
    device_class: Type.String(),
    gpu_model: Type.String(),
    gpu_ready: Type.Boolean(),
    managed_oci_gpu_ready: Type.Boolean(),
    cpu_cores: Type.Integer(),
    ram_gb: Type.Number(),
    vram_gb: Type.Number(),
    region: Type.String(),
    country: Type.String(),
    models: Type.Array(Type.String()),
    attestation: Type.String({
      description:
        '`none`, or `<method>:verified` / `<method>:unverified` / `<method>:expired` (re-attestation due: SVC_TEE_REATTEST_HOURS)',
    }),
    reputation: Type.Integer({
      minimum: 0,
      maximum: 100,
      description: '100 at registration; lowered for each receipt refused over its metering bound (docs/receipts.md)',
    }),
    load: Type.Number(),
    last_seen: Type.Integer({ description: 'unix seconds; 0 if never' }),
  },
  { $id: 'NodeSummary' },
);

export const NodeListResponseSchema = Type.Object(
  { nodes: Type.Array(Type.Ref(NodeSummarySchema)), total: Type.Integer() },
  { $id: 'NodeListResponse' },
);

/** The answer to `GET /api/v1/nodes/earnings`. */
export const NodeEarningsResponseSchema = Type.Object(
  {
    currency: Type.Literal('CAD'),
    total_cents: Type.Integer({ description: "the organization's node earnings, after the platform fee" }),
    payable_cents: Type.Integer({
      description:
        'what payouts may pay now: earnings less the part earned from free-tier credit, less payouts, at most the paid credit available (docs/billing.md)',
    }),
    payable: Type.Number({ description: 'payable_cents in CAD' }),
    non_payable_micro: Type.Integer({
      description: 'earnings from free-tier credit (promotional, never payable), micro-CAD',
    }),
    nodes: Type.Array(
      Type.Object({
        node_id: Type.String(),
        earned_cents: Type.Integer(),
        work_items: Type.Integer({ description: 'paid jobs and gateway requests' }),
      }),
      { description: 'nodes that earned anything, most first' },
    ),
  },
  { $id: 'NodeEarningsResponse' },
);
