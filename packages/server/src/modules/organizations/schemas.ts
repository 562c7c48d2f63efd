import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../platform/schemas.js';
import { Email, Password, RoleSchema } from '../auth/schemas.js';
import {
  OrganizationSchema,
  OrganizationMemberSchema,
  OrganizationResponseSchema,
  OrganizationMembersResponseSchema,
  OrganizationInviteResponseSchema,
} from '@svc/protocol/rest';

/** Shapes the dashboard reads too: defined once in `@svc/protocol/rest`, named here as the routes use them. */
export const Organization = OrganizationSchema;
export const OrganizationMember = OrganizationMemberSchema;
export const OrganizationResponse = OrganizationResponseSchema;
export const OrganizationMembersResponse = OrganizationMembersResponseSchema;
export const OrganizationInviteResponse = OrganizationInviteResponseSchema;

export const OrganizationInviteRequest = Type.Object(
  { email: Email, role: Type.Optional(StringEnum(['admin', 'member'] as const, { default: 'member' })) },
  { $id: 'OrganizationInviteRequest', additionalProperties: false },
);

export const OrganizationAcceptInviteRequest = Type.Object(
  {
    token: Type.String({ minLength: 1, maxLength: 200 }),
    password: Password,
    name: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { $id: 'OrganizationAcceptInviteRequest', additionalProperties: false },
);

export const MemberRoleRequest = Type.Object(
  { role: RoleSchema },
  { $id: 'MemberRoleRequest', additionalProperties: false },
);

export const BuyerIdParams = Type.Object({ buyer_id: Type.String({ pattern: '^buy_[a-z0-9]{26}$' }) });
