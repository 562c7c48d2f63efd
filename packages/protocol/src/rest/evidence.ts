import { Type } from '@sinclair/typebox';
import { DateTime, Nullable, StringEnum } from './common.js';

const Str = Type.String();
const NullableStr = Nullable(Type.String());

export const EvidenceRunSchema = Type.Object(
  {
    id: Str,
    job_id: Str,
    buyer_id: NullableStr,
    subject_type: StringEnum(['job', 'request', 'work_order', 'capture_set']),
    status: StringEnum(['open', 'completed'], {
      description: '`open` while recording; `completed` once closed (the certificate says it is signed)',
    }),
    summary: Str,
    jurisdiction: NullableStr,
    policy_id: Str,
    trust_tier: Str,
    work_type: Str,
    event_count: Type.Integer(),
    root_hash: NullableStr,
    root_signature_hex: NullableStr,
    signer_public_key_hex: NullableStr,
    signer_key_id: NullableStr,
    created_at: DateTime,
    updated_at: DateTime,
    signed_at: Nullable(DateTime),
  },
  { $id: 'EvidenceRun' },
);

export const EvidenceEventSchema = Type.Object(
  {
    id: Str,
    run_id: Str,
    subject_id: Str,
    event_type: Str,
    event_hash: Str,
    summary: Str,
    sequence: Type.Integer(),
    metadata: Type.Record(Type.String(), Type.Unknown()),
    created_at: DateTime,
  },
  { $id: 'EvidenceEvent' },
);

export const EvidenceEdgeSchema = Type.Object(
  { run_id: Str, from_event_id: Str, to_event_id: Str, edge_type: StringEnum(['then', 'caused_by']) },
  { $id: 'EvidenceEdge' },
);

export const EvidenceCertificateSchema = Type.Object(
  {
    algorithm: Str,
    version: Str,
    root_hash: NullableStr,
    signature_hex: NullableStr,
    signer_public_key_hex: NullableStr,
    key_id: NullableStr,
    signed: Type.Boolean(),
    verified: Type.Boolean({
      description: 'true when the graph-root signature verifies, checked when this response was made',
    }),
    signed_at: Nullable(DateTime),
    note: Str,
  },
  { $id: 'EvidenceCertificate' },
);

/** The answer to `GET /api/v1/jobs/:id/evidence`. */
export const EvidenceGraphResponseSchema = Type.Object(
  {
    run: Type.Ref(EvidenceRunSchema),
    events: Type.Array(Type.Ref(EvidenceEventSchema)),
    edges: Type.Array(Type.Ref(EvidenceEdgeSchema)),
    certificate: Type.Ref(EvidenceCertificateSchema),
  },
  { $id: 'EvidenceGraphResponse' },
);
