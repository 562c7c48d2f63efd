import { Type } from '@sinclair/typebox';

const Base64 = (max: number, description: string) =>
  Type.String({ pattern: '^[A-Za-z0-9+/]*={0,2}$', maxLength: max, description });
const Pem = Type.String({ maxLength: 65536, description: 'PEM certificates' });

export const ChallengeResponse = Type.Object(
  {
    challenge: Type.String({ description: '32 random bytes, hex; single use' }),
    expires_at: Type.String({ format: 'date-time', description: '10 minutes after issue' }),
    report_data: Type.String({
      description: 'SHA-512(challenge || node public key), hex: the 64 bytes the evidence must carry',
    }),
  },
  { $id: 'AttestationChallenge' },
);

export const EvidenceRequest = Type.Object(
  {
    challenge: Type.String({ pattern: '^[0-9a-f]{64}$' }),
    method: Type.Integer({
      minimum: 1,
      maximum: 3,
      description: '1 Intel TDX, 2 AMD SEV-SNP, 3 NVIDIA CC (no verifier yet)',
    }),
    sev_snp: Type.Optional(
      Type.Object(
        {
          report: Base64(4096, 'the 1184-byte attestation report, base64'),
          vcek: Base64(8192, "the chip's VCEK, DER, base64"),
          chain: Type.Optional(Pem),
        },
        { additionalProperties: false },
      ),
    ),
    tdx: Type.Optional(
      Type.Object(
        {
          quote: Base64(65536, 'the quote (v4 or v5), base64'),
          collateral: Type.Object(
            {
              tcb_info: Type.String({ maxLength: 262144, description: 'the PCS TCB Info response body, as served' }),
              qe_identity: Type.String({
                maxLength: 65536,
                description: 'the PCS QE Identity response body, as served',
              }),
              tcb_signing_chain: Pem,
              pck_crl: Base64(1048576, 'DER, base64'),
              root_crl: Base64(65536, 'DER, base64'),
            },
            { additionalProperties: false },
          ),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { $id: 'AttestationEvidence', additionalProperties: false },
);

export const AttestationResult = Type.Object(
  {
    node_id: Type.String(),
    attestation: Type.String({ description: '`<method>:verified` or `<method>:unverified`' }),
    verified: Type.Boolean(),
    method: Type.String(),
    measurement: Type.Union([Type.String(), Type.Null()]),
    tcb_status: Type.Union([Type.String(), Type.Null()]),
    verified_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    checks: Type.Array(Type.Object({ name: Type.String(), ok: Type.Boolean(), detail: Type.String() })),
  },
  { $id: 'AttestationResult' },
);
