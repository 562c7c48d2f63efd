import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { principalOf } from '../../platform/principal.js';
import { MessageResponse } from '../../platform/schemas.js';
import { AuthResponse } from '../auth/schemas.js';
import {
  BuyerIdParams,
  MemberRoleRequest,
  Organization,
  OrganizationAcceptInviteRequest,
  OrganizationInviteRequest,
  OrganizationInviteResponse,
  OrganizationMember,
  OrganizationMembersResponse,
  OrganizationResponse,
} from './schemas.js';
import { acceptInvite, changeRole, currentOrganization, invite, members, removeMember } from './service.js';

const tags = ['organizations'];

export async function organizationRoutes(app: App, ctx: ServiceContext): Promise<void> {
  app.addSchema(Organization);
  app.addSchema(OrganizationMember);
  app.get(
    '/api/v1/organizations/current',
    {
      config: { auth: { permission: 'organization:read' } },
      schema: {
        summary: 'The current organization and your membership',
        tags,
        response: { 200: OrganizationResponse },
      },
    },
    async (request) => currentOrganization(ctx, principalOf(request)),
  );
  app.get(
    '/api/v1/organizations/current/members',
    {
      config: { auth: { permission: 'organization:read' } },
      schema: { summary: 'Members and their roles', tags, response: { 200: OrganizationMembersResponse } },
    },
    async (request) => members(ctx, principalOf(request)),
  );
  app.post(
    '/api/v1/organizations/current/invites',
    {
      config: { auth: { permission: 'organization:write' }, noStore: true },
      schema: {
        summary: 'Invite someone (owners and admins)',
        tags,
        body: OrganizationInviteRequest,
        response: { 201: OrganizationInviteResponse },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send(
          await invite(ctx, principalOf(request), { email: request.body.email, role: request.body.role ?? 'member' }),
        ),
  );
  app.post(
    '/api/v1/organizations/invites/accept',
    {
      config: { auth: { public: true }, noStore: true },
      schema: {
        summary: 'Accept an invite: join with an existing account or create one',
        tags,
        body: OrganizationAcceptInviteRequest,
        response: { 200: AuthResponse },
      },
    },
    async (request) => acceptInvite(ctx, request.body),
  );
  app.patch(
    '/api/v1/organizations/current/members/:buyer_id',
    {
      config: { auth: { permission: 'organization:write' } },
      schema: {
        summary: "Change a member's role (owners and admins)",
        tags,
        params: BuyerIdParams,
        body: MemberRoleRequest,
        response: { 200: OrganizationResponse },
      },
    },
    async (request) => changeRole(ctx, principalOf(request), request.params.buyer_id, request.body.role),
  );
  app.delete(
    '/api/v1/organizations/current/members/:buyer_id',
    {
      config: { auth: { permission: 'organization:write' } },
      schema: {
        summary: 'Remove a member (owners and admins); their keys here are revoked',
        tags,
        params: BuyerIdParams,
        response: { 200: MessageResponse },
      },
    },
    async (request) => removeMember(ctx, principalOf(request), request.params.buyer_id),
  );
}
