import { Type } from '@sinclair/typebox';
import { LogKeysSchema } from '@svc/protocol/rest';

/** The log's names and note verifier keys (`GET /api/v1/keys/platform`): defined in `@svc/protocol/rest`. */
export const LogKeys = LogKeysSchema;

/** A leaf's data: JCS of these six fields is the log's record for a closed evidence run. */
export const LogLeaf = Type.Object({
  run_id: Type.String(),
  subject_type: Type.String(),
  subject_id: Type.String(),
  root_hash: Type.String({ pattern: '^[0-9a-f]{64}$' }),
  event_count: Type.Integer(),
  closed_at: Type.String(),
});

const Base64Hash = Type.String({ pattern: '^[A-Za-z0-9+/]{43}=$' });

export const ConsistencyQuery = Type.Object({
  from: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
  to: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
});

export const ConsistencyResponse = Type.Object(
  { from: Type.Integer(), to: Type.Integer(), proof: Type.Array(Base64Hash) },
  { $id: 'LogConsistencyProof' },
);

export const InclusionQuery = Type.Object({
  run_id: Type.String({ pattern: '^[A-Za-z0-9._:-]{1,256}$' }),
  tree_size: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
});

export const InclusionResponse = Type.Object(
  {
    run_id: Type.String(),
    leaf_index: Type.Integer(),
    tree_size: Type.Integer(),
    leaf: LogLeaf,
    leaf_hash: Type.String({ pattern: '^[0-9a-f]{64}$' }),
    proof: Type.Array(Base64Hash),
    checkpoint: Type.Union([Type.String(), Type.Null()], {
      description: 'the signed checkpoint of tree_size, or null when none was signed at that size',
    }),
  },
  { $id: 'LogInclusionProof' },
);
