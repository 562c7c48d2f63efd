import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../platform/schemas.js';
import {
  EvidenceRunSchema,
  EvidenceEventSchema,
  EvidenceEdgeSchema,
  EvidenceCertificateSchema,
  EvidenceGraphResponseSchema,
} from '@svc/protocol/rest';

/** Shapes the dashboard reads too: defined once in `@svc/protocol/rest`, named here as the routes use them. */
export const EvidenceRun = EvidenceRunSchema;
export const EvidenceEvent = EvidenceEventSchema;
export const EvidenceEdge = EvidenceEdgeSchema;
export const EvidenceCertificate = EvidenceCertificateSchema;
export const EvidenceGraphResponse = EvidenceGraphResponseSchema;

const Str = Type.String();
const Time = Type.String({ format: 'date-time' });

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
