import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { nodeOf } from '../nodes/node-auth.js';
import { AttestationResult, ChallengeResponse, EvidenceRequest } from './schemas.js';
import { issueChallenge, submitEvidence } from './service.js';

const tags = ['nodes'];
const node = { auth: { node: true as const } };

export async function attestationRoutes(app: App, ctx: ServiceContext): Promise<void> {
  app.post(
    '/api/v1/node/attestation/challenge',
    {
      config: node,
      schema: {
        summary: 'A single-use attestation challenge, valid 10 minutes (signed node request)',
        tags,
        response: { 200: ChallengeResponse },
      },
    },
    async (request) => issueChallenge(ctx, nodeOf(request)),
  );
  app.post(
    '/api/v1/node/attestation',
    {
      config: node,
      bodyLimit: 2 * 1024 * 1024,
      schema: {
        summary:
          'Submit TEE evidence bound to a challenge; verified nodes join the sovereign pool (signed node request)',
        tags,
        body: EvidenceRequest,
        response: { 200: AttestationResult },
      },
    },
    async (request) => submitEvidence(ctx, nodeOf(request), request.body),
  );
}
