import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../platform/schemas.js';

const Str = Type.String();
const NullableStr = Type.Union([Type.String(), Type.Null()]);
const Time = Type.String({ format: 'date-time' });

export const EvidenceRun = Type.Object(
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
    created_at: Time,
    updated_at: Time,
    signed_at: Type.Union([Time, Type.Null()]),
  },
  { $id: 'EvidenceRun' },
);

export const EvidenceEvent = Type.Object(
  {
    id: Str,
    run_id: Str,
    subject_id: Str,
    event_type: Str,
    event_hash: Str,
    summary: Str,
    sequence: Type.Integer(),
    metadata: Type.Record(Type.String(), Type.Unknown()),
    created_at: Time,
  },
  { $id: 'EvidenceEvent' },
);

export const EvidenceEdge = Type.Object(
  {
    run_id: Str,
    from_event_id: Str,
    to_event_id: Str,
    edge_type: StringEnum(['then', 'caused_by']),
  },
  { $id: 'EvidenceEdge' },
);

export const EvidenceCertificate = Type.Object(
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
    signed_at: Type.Union([Time, Type.Null()]),
    note: Str,
  },
  { $id: 'EvidenceCertificate' },
);

export const EvidenceGraphResponse = Type.Object(
  {
    run: Type.Ref(EvidenceRun),
    events: Type.Array(Type.Ref(EvidenceEvent)),
    edges: Type.Array(Type.Ref(EvidenceEdge)),
    certificate: Type.Ref(EvidenceCertificate),
  },
  { $id: 'EvidenceGraphResponse' },
);

export const EvidenceBundleResponse = Type.Object(
  {
    type: Type.Literal('svc.evidence_bundle.v1'),
    bundle_hash: Str,
    generated_at: Time,
    job: Type.Record(Type.String(), Type.Unknown()),
    policy_snapshot: Type.Record(Type.String(), Type.Unknown()),
    receipts: Type.Array(Type.Record(Type.String(), Type.Unknown())),
    verifier: Type.Record(Type.String(), Type.Unknown()),
    evidence: Type.Ref(EvidenceGraphResponse),
  },
  { $id: 'EvidenceBundleResponse', additionalProperties: true },
);

export const EvidenceRunsQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, default: 0 })),
  job_id: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9._:-]{1,256}$' })),
  status: Type.Optional(
    StringEnum(['open', 'completed', 'signed'], {
      description: '`open` or `completed`; `signed` is the old name of `completed`, still accepted',
    }),
  ),
  from: Type.Optional(Type.String({ format: 'date-time' })),
  to: Type.Optional(Type.String({ format: 'date-time' })),
});

export const EvidenceRunsResponse = Type.Object(
  { runs: Type.Array(Type.Ref(EvidenceRun)), total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer() },
  { $id: 'EvidenceRunsResponse' },
);
