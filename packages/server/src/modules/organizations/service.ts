import { createHash, randomBytes } from 'node:crypto';
import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import { requireManager, type Principal, type Role } from '../../platform/principal.js';
import { checkPassword, normalizeEmail, startSession } from '../auth/service.js';
import { hashPassword, verifyPassword } from '../auth/credentials.js';
import * as accounts from '../auth/store.js';
import { revokeKeysOf } from '../keys/store.js';
import * as store from './store.js';

export const INVITE_TTL_DAYS = 7;

function memberView(m: accounts.MemberRow) {
  return { buyer_id: m.buyer_id, email: m.email, name: m.name, role: m.role, created_at: m.created_at.toISOString() };
}

async function organizationOf(db: Queryable, orgId: string) {
  const org = await accounts.findOrganization(db, orgId);
  if (!org) throw new ApiError('not_found', 'organization not found');
  return { id: org.id, name: org.name, created_at: org.created_at.toISOString() };
}

export async function currentOrganization(ctx: ServiceContext, principal: Principal) {
  const member = await accounts.findMember(ctx.db, principal.orgId, principal.buyerId);
  if (!member) throw new ApiError('not_found', 'you are not a member of this organization');
  return { organization: await organizationOf(ctx.db, principal.orgId), member: memberView(member) };
}

export async function members(ctx: ServiceContext, principal: Principal) {
  return {
    organization: await organizationOf(ctx.db, principal.orgId),
    members: (await accounts.listMembers(ctx.db, principal.orgId)).map(memberView),
  };
}

const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');

/** Owners and admins invite; the token is single-use, valid 7 days, and stored only as a hash. */
export async function invite(
  ctx: ServiceContext,
  principal: Principal,
  input: { email: string; role: 'admin' | 'member' },
) {
  requireManager(principal, 'invite members');
  const email = normalizeEmail(input.email);
  const existing = await accounts.findBuyerByEmail(ctx.db, email);
  if (existing && (await accounts.findMember(ctx.db, principal.orgId, existing.id))) {
    throw new ApiError('conflict', `${email} is already a member of this organization`);
  }
  const token = randomBytes(32).toString('base64url');
  const expiresAt = new Date(Date.now() + INVITE_TTL_DAYS * 86_400_000);
  await store.insertInvite(ctx.db, {
    id: newId('inv'),
    orgId: principal.orgId,
    email,
    role: input.role,
    tokenHash: hashToken(token),
    invitedBy: principal.buyerId,
    expiresAt,
  });
  return {
    organization: await organizationOf(ctx.db, principal.orgId),
    email,
    role: input.role,
    invite_token: token,
    accept_url: `${ctx.config.publicUrl}/invite?token=${encodeURIComponent(token)}`,
    expires_at: expiresAt.toISOString(),
  };
}

/**
 * Accepts an invite: joins an existing account (its password must match) or creates one, makes
 * the invited organization its current one, and starts a session there.
 */
export async function acceptInvite(
  ctx: ServiceContext,
  input: { token: string; password: string; name?: string | undefined },
) {
  const existingHash = await ctx.db.transaction(async (tx) => {
    const email = await store.findInviteEmail(tx, hashToken(input.token));
    return email ? (await accounts.findBuyerByEmail(tx, email))?.password_hash : undefined;
  });
  if (existingHash !== undefined && !(await verifyPassword(input.password, existingHash))) {
    throw new ApiError('unauthorized', 'this email already has an account; give its password to join');
  }
  if (existingHash === undefined) checkPassword(ctx, input.password);
  const newHash = existingHash === undefined ? await hashPassword(input.password) : undefined;
  return ctx.db.transaction(async (tx) => {
    const inv = await store.consumeInvite(tx, hashToken(input.token));
    if (!inv) throw new ApiError('not_found', 'invite not found, already used or expired');
    let buyer = await accounts.findBuyerByEmail(tx, inv.email);
    if (!buyer) {
      if (!newHash) throw new ApiError('conflict', 'the account changed while accepting; try again');
      buyer = await accounts.insertBuyer(tx, {
        id: newId('buy'),
        email: inv.email,
        name: input.name?.trim() ?? '',
        passwordHash: newHash,
        defaultOrgId: inv.org_id,
      });
      if (!buyer) throw new ApiError('conflict', 'an account with this email was just created; try again');
    }
    if (!(await accounts.findMember(tx, inv.org_id, buyer.id)))
      await accounts.insertMembership(tx, { orgId: inv.org_id, buyerId: buyer.id, role: inv.role });
    await accounts.setDefaultOrg(tx, buyer.id, inv.org_id);
    const org = await accounts.findOrganization(tx, inv.org_id);
    const role = await accounts.findRole(tx, inv.org_id, buyer.id);
    if (!org || !role) throw new ApiError('not_found', 'organization not found');
    const token = await startSession(ctx, tx, buyer.id, org.id);
    return {
      buyer_id: buyer.id,
      email: buyer.email,
      name: buyer.name,
      token,
      organization: { id: org.id, name: org.name, created_at: org.created_at.toISOString(), role },
    };
  });
}

/**
 * Changes a member's role. Owners and admins manage; only an owner grants or takes away `owner`;
 * the last owner cannot be demoted. Another organization's member is 404.
 */
export async function changeRole(ctx: ServiceContext, principal: Principal, buyerId: string, role: Role) {
  requireManager(principal, 'change roles');
  const changed = await ctx.db.transaction(async (tx) => {
    const owners = await accounts.lockOwners(tx, principal.orgId);
    const target = await accounts.findMember(tx, principal.orgId, buyerId, true);
    if (!target) throw new ApiError('not_found', `member ${buyerId} not found`);
    if ((role === 'owner' || target.role === 'owner') && principal.role !== 'owner')
      throw new ApiError('forbidden', 'only an owner can grant or remove the owner role');
    if (target.role === 'owner' && role !== 'owner' && owners <= 1)
      throw new ApiError('conflict', 'the last owner cannot be demoted; make someone else owner first');
    await accounts.setRole(tx, principal.orgId, buyerId, role);
    return { organization: await organizationOf(tx, principal.orgId), member: memberView({ ...target, role }) };
  });
  await ctx.keyCache.memberChanged(principal.orgId, buyerId);
  return changed;
}

/** Removes a member, ends their sessions in this organization and revokes the keys they created here. */
export async function removeMember(ctx: ServiceContext, principal: Principal, buyerId: string) {
  requireManager(principal, 'remove members');
  await ctx.db.transaction(async (tx) => {
    const owners = await accounts.lockOwners(tx, principal.orgId);
    const target = await accounts.findMember(tx, principal.orgId, buyerId, true);
    if (!target) throw new ApiError('not_found', `member ${buyerId} not found`);
    if (target.role === 'owner' && principal.role !== 'owner')
      throw new ApiError('forbidden', 'only an owner can remove an owner');
    if (target.role === 'owner' && owners <= 1) throw new ApiError('conflict', 'the last owner cannot be removed');
    await accounts.deleteMember(tx, principal.orgId, buyerId);
    await revokeKeysOf(tx, principal.orgId, buyerId, 'member removed from the organization');
  });
  await ctx.keyCache.memberChanged(principal.orgId, buyerId);
  return { message: `member ${buyerId} removed` };
}
