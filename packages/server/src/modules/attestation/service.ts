import { createHash, randomBytes } from 'node:crypto';
import type { Static } from '@sinclair/typebox';
import type { ServiceContext } from '../../service-context.js';
import { ATTESTATION_METHODS } from '../../platform/attestation.js';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import type { AttestationSummary } from './summary.js';
import { expireAttestations, setNodeAttestation, type NodeRow } from '../nodes/store.js';
import type { EvidenceRequest } from './schemas.js';
import { consumeChallenge, findAttestation, forgetOldChallenges, insertChallenge, saveAttestation } from './store.js';

export const CHALLENGE_TTL_MS = 10 * 60_000;

/** SHA-512(challenge || node public key), both raw bytes: what a node's evidence must carry as report_data. */
export function bindingReportData(challengeHex: string, nodePubkeyHex: string): Buffer {
  return createHash('sha512')
    .update(Buffer.from(challengeHex, 'hex'))
    .update(Buffer.from(nodePubkeyHex, 'hex'))
    .digest();
}

/** `POST /api/v1/node/attestation/challenge`: a single-use challenge for this node, 10 minutes. */
export async function issueChallenge(ctx: ServiceContext, node: NodeRow) {
  const challenge = randomBytes(32).toString('hex');
  const expiresAt = new Date(Date.now() + CHALLENGE_TTL_MS);
  await insertChallenge(ctx.db, { challenge, nodeId: node.id, expiresAt });
  return {
    challenge,
    expires_at: expiresAt.toISOString(),
    report_data: bindingReportData(challenge, node.pubkey).toString('hex'),
  };
}

const bad = (path: string, message: string) =>
  new ApiError('invalid_request', `${path.slice(1)} ${message}`, [{ path, message }]);

/**
 * `POST /api/v1/node/attestation`: verifies the node's evidence against its challenge. Verified
 * nodes join the sovereign pool until SVC_TEE_REATTEST_HOURS pass; any other outcome takes the
 * node out of it. Answers the checks either way.
 */
export async function submitEvidence(ctx: ServiceContext, node: NodeRow, body: Static<typeof EvidenceRequest>) {
  if (body.method === 2 && !body.sev_snp) throw bad('/sev_snp', 'is required for method 2 (AMD SEV-SNP)');
  if (body.method === 1 && !body.tdx) throw bad('/tdx', 'is required for method 1 (Intel TDX)');
  if (!(await consumeChallenge(ctx.db, body.challenge, node.id)))
    throw bad('/challenge', "is unknown, already used, expired or another node's: ask for a new one");
  const now = new Date();
  const verdict = await ctx.attestation.verifyEvidence({
    method: body.method,
    sevSnp: body.sev_snp && {
      report: Buffer.from(body.sev_snp.report, 'base64'),
      vcek: Buffer.from(body.sev_snp.vcek, 'base64'),
      chain: body.sev_snp.chain,
    },
    tdx: body.tdx && {
      quote: Buffer.from(body.tdx.quote, 'base64'),
      collateral: {
        tcbInfo: body.tdx.collateral.tcb_info,
        qeIdentity: body.tdx.collateral.qe_identity,
        tcbSigningChain: body.tdx.collateral.tcb_signing_chain,
        pckCrl: Buffer.from(body.tdx.collateral.pck_crl, 'base64'),
        rootCrl: Buffer.from(body.tdx.collateral.root_crl, 'base64'),
      },
    },
    expectedReportData: bindingReportData(body.challenge, node.pubkey),
    now,
  });
  const expiresAt = verdict.verified ? new Date(now.getTime() + ctx.config.tee.reattestHours * 3_600_000) : null;
  await ctx.db.transaction(async (tx) => {
    await saveAttestation(tx, {
      node_id: node.id,
      method: body.method,
      verified: verdict.verified,
      measurement: verdict.measurement,
      tcb_status: verdict.tcb_status,
      checks: verdict.checks,
      verified_at: verdict.verified ? now : null,
      expires_at: expiresAt,
    });
    await setNodeAttestation(tx, node.id, { method: body.method, verified: verdict.verified, expiresAt });
  });
  const method = ATTESTATION_METHODS[body.method] ?? 'unknown';
  ctx.log.info(
    {
      node_id: node.id,
      method,
      verified: verdict.verified,
      failed: verdict.checks.filter((c) => !c.ok).map((c) => c.name),
    },
    'node attestation',
  );
  await ctx.nodeDirectory.changed(node.id);
  await ctx.bus.publish('nodes', node.id);
  return {
    node_id: node.id,
    attestation: `${method}:${verdict.verified ? 'verified' : 'unverified'}`,
    verified: verdict.verified,
    method,
    measurement: verdict.measurement,
    tcb_status: verdict.tcb_status,
    verified_at: verdict.verified ? now.toISOString() : null,
    expires_at: expiresAt?.toISOString() ?? null,
    checks: verdict.checks,
  };
}

/** What receipts and evidence of sovereign work carry about the node that did it; null when not verified. */
export async function attestationSummary(db: Queryable, nodeId: string): Promise<AttestationSummary | null> {
  const a = await findAttestation(db, nodeId);
  if (!a?.verified || !a.verified_at || !a.expires_at || a.expires_at.getTime() <= Date.now()) return null;
  return {
    method: ATTESTATION_METHODS[a.method] ?? 'unknown',
    measurement: a.measurement,
    tcb_status: a.tcb_status,
    verified_at: a.verified_at.toISOString(),
  };
}

/** Background: lapsed verifications leave the pool (the pool's queries also check the time). */
export async function expireLapsedAttestations(ctx: ServiceContext): Promise<void> {
  const expired = await expireAttestations(ctx.db);
  for (const id of expired) ctx.log.info({ node_id: id }, 'node attestation expired: re-attestation due');
  await forgetOldChallenges(ctx.db);
}
