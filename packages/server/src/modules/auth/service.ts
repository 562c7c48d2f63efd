import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Principal, Role } from '../../platform/principal.js';
import { SESSION_SCOPES } from '../../platform/scopes.js';
import { openAccount, postCredit } from '../billing/store.js';
import { createKey } from '../keys/service.js';
import { hashApiKey, parseApiKey, sameDigest } from '../keys/credentials.js';
import { touchKey } from '../keys/store.js';
import { DUMMY_PASSWORD_HASH, hashPassword, verifyPassword } from './credentials.js';
import { signSessionToken, verifySessionToken } from './sessions.js';
import * as store from './store.js';

/** Trimmed and lower-cased: the one form an email is stored and compared in. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

export function checkPassword(ctx: ServiceContext, password: string): void {
  if ([...password].length < ctx.config.minPasswordLength) {
    throw new ApiError('invalid_request', `password must be at least ${ctx.config.minPasswordLength} characters`, [
      { path: '/password', message: `must be at least ${ctx.config.minPasswordLength} characters` },
    ]);
  }
}

function organizationContext(org: store.OrgRow, role: Role) {
  return { id: org.id, name: org.name, created_at: org.created_at.toISOString(), role };
}

/** Starts a session for the buyer in the organization and returns its signed token. */
export async function startSession(
  ctx: ServiceContext,
  db: Queryable,
  buyerId: string,
  orgId: string,
): Promise<string> {
  const sessionId = newId('ses');
  const expiresAt = new Date(Date.now() + ctx.config.sessionTtlSeconds * 1000);
  await store.insertSession(db, { id: sessionId, buyerId, orgId, expiresAt });
  return signSessionToken(ctx.secrets.sessionSecret, { sessionId, buyerId, orgId }, expiresAt);
}

/**
 * Creates a buyer account with its personal organization (role owner), the free-tier grant, a
 * first `buyer` key and a session, all in one transaction. A taken email is 409.
 */
export async function signup(
  ctx: ServiceContext,
  input: { email: string; password: string; name?: string | undefined },
) {
  const email = normalizeEmail(input.email);
  checkPassword(ctx, input.password);
  const name = input.name?.trim() ?? '';
  const passwordHash = await hashPassword(input.password);
  return ctx.db.transaction(async (tx) => {
    if (await store.findBuyerByEmail(tx, email))
      throw new ApiError('conflict', 'an account with this email already exists');
    const org = await store.insertOrganization(tx, {
      id: newId('org'),
      name: name ? `${name}'s organization` : `${email}'s organization`,
    });
    const buyer = await store.insertBuyer(tx, { id: newId('buy'), email, name, passwordHash, defaultOrgId: org.id });
    if (!buyer) throw new ApiError('conflict', 'an account with this email already exists');
    await store.insertMembership(tx, { orgId: org.id, buyerId: buyer.id, role: 'owner' });
    await openAccount(tx, org.id);
    if (ctx.config.freeTierCents > 0) {
      await postCredit(tx, {
        orgId: org.id,
        cents: ctx.config.freeTierCents,
        freeMicro: ctx.config.freeTierCents * 10_000,
        txType: 'free_tier',
        description: 'Free tier: one-time grant for a new organization',
      });
    }
    const key = await createKey(ctx, tx, { orgId: org.id, buyerId: buyer.id, label: 'default', scopes: ['buyer'] });
    const token = await startSession(ctx, tx, buyer.id, org.id);
    return {
      api_key: key.api_key,
      buyer_id: buyer.id,
      email,
      name,
      token,
      organization: organizationContext(org, 'owner'),
    };
  });
}

/** Checks email and password; the same answer, in about the same time, for an unknown email. */
export async function login(ctx: ServiceContext, input: { email: string; password: string }) {
  const email = normalizeEmail(input.email);
  const buyer = await store.findBuyerByEmail(ctx.db, email);
  const ok = await verifyPassword(input.password, buyer?.password_hash ?? DUMMY_PASSWORD_HASH);
  if (!buyer || !ok) throw new ApiError('unauthorized', 'invalid email or password');
  const role = await store.findRole(ctx.db, buyer.default_org_id, buyer.id);
  const org = await store.findOrganization(ctx.db, buyer.default_org_id);
  if (!role || !org) throw new ApiError('unauthorized', 'this account belongs to no organization');
  const token = await startSession(ctx, ctx.db, buyer.id, org.id);
  return {
    buyer_id: buyer.id,
    email: buyer.email,
    name: buyer.name,
    token,
    organization: organizationContext(org, role),
  };
}

export async function logout(ctx: ServiceContext, principal: Principal) {
  if (principal.kind !== 'session' || !principal.sessionId) {
    throw new ApiError(
      'invalid_request',
      'logout ends a session token; to disable an API key, revoke it at POST /api/v1/auth/api-keys/{key_id}/revoke',
    );
  }
  await store.revokeSession(ctx.db, principal.sessionId);
  return { message: 'logged out' };
}

export async function me(ctx: ServiceContext, principal: Principal) {
  const buyer = await store.findBuyer(ctx.db, principal.buyerId);
  const org = await store.findOrganization(ctx.db, principal.orgId);
  if (!buyer || !org) throw new ApiError('unauthorized', 'account no longer exists');
  return {
    buyer_id: buyer.id,
    email: buyer.email,
    name: buyer.name,
    organization: organizationContext(org, principal.role),
  };
}

/**
 * A deliberate cache: when this process last wrote `last_used_at` for each key, so that a busy
 * key costs one write per 10 seconds instead of one per request. Bounded; cleared when full.
 */
const lastTouched = new Map<string, number>();
const TOUCH_INTERVAL_MS = 10_000;

function shouldTouch(keyId: string): boolean {
  const now = Date.now();
  if ((lastTouched.get(keyId) ?? 0) > now - TOUCH_INTERVAL_MS) return false;
  if (lastTouched.size >= 100_000) lastTouched.clear();
  lastTouched.set(keyId, now);
  return true;
}

/**
 * Resolves a credential to a principal. Keys come from the in-memory key cache (`ctx.keyCache`:
 * exact in this process, invalidated on other instances over the bus, re-read after 1 s at most);
 * sessions are read from the store every time. Undefined when invalid.
 */
export async function authenticate(
  ctx: ServiceContext,
  credential: { value: string; via: 'bearer' | 'x-api-key' },
): Promise<Principal | undefined> {
  const keyId = parseApiKey(credential.value);
  if (keyId) {
    const row = await ctx.keyCache.lookup(keyId);
    if (!row || row.revoked_at || !row.role) return undefined;
    if (!sameDigest(hashApiKey(credential.value, ctx.secrets.pepper), row.hash)) return undefined;
    if (shouldTouch(keyId))
      touchKey(ctx.db, keyId).catch((err: unknown) => ctx.log.warn({ err }, 'could not record key use'));
    return { kind: 'key', orgId: row.org_id, buyerId: row.buyer_id, role: row.role, scopes: row.scopes, keyId };
  }
  if (credential.via !== 'bearer') return undefined;
  const claims = await verifySessionToken(ctx.secrets.sessionSecret, credential.value);
  if (!claims) return undefined;
  const session = await store.findLiveSession(ctx.db, claims.sessionId);
  if (!session || session.buyer_id !== claims.buyerId || session.org_id !== claims.orgId) return undefined;
  return {
    kind: 'session',
    orgId: session.org_id,
    buyerId: session.buyer_id,
    role: session.role,
    scopes: SESSION_SCOPES,
    sessionId: claims.sessionId,
  };
}
