import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import type { Principal } from '../../platform/principal.js';
import { API_KEY_HASH_ALG, generateApiKey, hashApiKey } from './credentials.js';
import { invalidScopes, scopesNotMintable } from '../../platform/scopes.js';
import { findKey, insertKey, listKeys, revokeKey, type KeyRecordRow } from './store.js';

export function keyRecord(row: KeyRecordRow) {
  return {
    key_id: row.key_id,
    prefix: row.prefix,
    hash_alg: row.hash_alg,
    label: row.label,
    buyer_id: row.buyer_id,
    scopes: row.scopes,
    created_at: row.created_at.toISOString(),
    last_used_at: row.last_used_at ? row.last_used_at.toISOString() : null,
    revoked_at: row.revoked_at ? row.revoked_at.toISOString() : null,
    revoked_reason: row.revoked_reason,
  };
}

/**
 * Creates a key for `buyerId` in `orgId` and returns the full key (shown once) with its record.
 * Runs in the caller's transaction when given one.
 */
export async function createKey(
  ctx: ServiceContext,
  db: Queryable,
  input: { orgId: string; buyerId: string; label: string; scopes: string[] },
): Promise<{ api_key: string; key: ReturnType<typeof keyRecord> }> {
  const bad = invalidScopes(input.scopes);
  if (bad.length > 0) {
    throw new ApiError(
      'invalid_request',
      `unknown scope ${bad.map((s) => `'${s}'`).join(', ')}; use buyer, read-only, write-only, buyer:read, operator or resource[:read|write]`,
      bad.map((s) => ({ path: `/scopes/${input.scopes.indexOf(s)}`, message: `unknown scope '${s}'` })),
    );
  }
  const generated = generateApiKey();
  const row = await insertKey(db, {
    keyId: generated.keyId,
    orgId: input.orgId,
    buyerId: input.buyerId,
    prefix: generated.prefix,
    hash: hashApiKey(generated.key, ctx.secrets.pepper),
    hashAlg: API_KEY_HASH_ALG,
    label: input.label,
    scopes: [...new Set(input.scopes)],
  });
  return { api_key: generated.key, key: keyRecord(row) };
}

/**
 * Creates a key on behalf of the caller, who may grant only what the minting rule allows
 * (scopesNotMintable: a key mints within its own scopes; owners' and admins' sessions mint any).
 */
export async function mintKey(ctx: ServiceContext, principal: Principal, input: { label: string; scopes: string[] }) {
  const beyond = scopesNotMintable(principal, input.scopes);
  if (beyond.length > 0 && invalidScopes(input.scopes).length === 0) {
    const held = principal.scopes.join(', ');
    throw new ApiError(
      'insufficient_scope',
      `this credential (scopes: ${held}) cannot grant ${beyond.map((s) => `'${s}'`).join(', ')}: a key may only create keys within its own scopes; an owner or admin signed in can grant any scope`,
    );
  }
  return createKey(ctx, ctx.db, { orgId: principal.orgId, buyerId: principal.buyerId, ...input });
}

const isManager = (p: Principal) => p.role === 'owner' || p.role === 'admin';

/** Owners and admins see every key of the organization; members see their own. */
export async function listVisibleKeys(ctx: ServiceContext, principal: Principal) {
  const rows = await listKeys(ctx.db, principal.orgId, isManager(principal) ? undefined : principal.buyerId);
  return { keys: rows.map(keyRecord) };
}

/**
 * Revokes at once; another organization's key, or (for a member) someone else's, is 404. A
 * credential revokes only keys it could have minted (the same rule: a `keys:write` key cannot
 * revoke the owner's `operator` key; an owner's or admin's session revokes any).
 */
export async function revokeVisibleKey(ctx: ServiceContext, principal: Principal, keyId: string, reason: string) {
  const existing = await findKey(ctx.db, principal.orgId, keyId);
  if (!existing || (!isManager(principal) && existing.buyer_id !== principal.buyerId)) {
    throw new ApiError('not_found', `API key ${keyId} not found`);
  }
  const beyond = scopesNotMintable(principal, existing.scopes);
  if (beyond.length > 0) {
    throw new ApiError(
      'insufficient_scope',
      `this credential (scopes: ${principal.scopes.join(', ')}) cannot revoke API key ${keyId}, which holds ${beyond.map((s) => `'${s}'`).join(', ')}: a key may only revoke keys within its own scopes; an owner or admin signed in can revoke any`,
    );
  }
  const revoked = await revokeKey(ctx.db, principal.orgId, keyId, reason);
  if (!revoked) throw new ApiError('conflict', `API key ${keyId} is already revoked`);
  await ctx.keyCache.keyChanged(keyId);
  ctx.log.info({ key_id: keyId, org_id: principal.orgId, by: principal.buyerId }, 'API key revoked');
  return { message: `API key ${keyId} revoked` };
}
