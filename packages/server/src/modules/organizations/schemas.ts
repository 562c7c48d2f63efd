import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../platform/schemas.js';
import { Email, Password, RoleSchema } from '../auth/schemas.js';

export const Organization = Type.Object(
  { id: Type.String(), name: Type.String(), created_at: Type.String({ format: 'date-time' }) },
  { $id: 'Organization' },
);

export const OrganizationMember = Type.Object(
  {
    buyer_id: Type.String(),
    email: Type.String(),
    name: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    role: RoleSchema,
  },
  { $id: 'OrganizationMember' },
);

export const OrganizationResponse = Type.Object(
  { organization: Type.Ref(Organization), member: Type.Ref(OrganizationMember) },
  { $id: 'OrganizationResponse' },
);

export const OrganizationMembersResponse = Type.Object(
  { organization: Type.Ref(Organization), members: Type.Array(Type.Ref(OrganizationMember)) },
  { $id: 'OrganizationMembersResponse' },
);

export const OrganizationInviteRequest = Type.Object(
  { email: Email, role: Type.Optional(StringEnum(['admin', 'member'] as const, { default: 'member' })) },
  { $id: 'OrganizationInviteRequest', additionalProperties: false },
);

export const OrganizationInviteResponse = Type.Object(
  {
    organization: Type.Ref(Organization),
    email: Type.String(),
    role: StringEnum(['admin', 'member'] as const),
    invite_token: Type.String({ description: 'single use; valid 7 days' }),
    accept_url: Type.String(),
    expires_at: Type.String({ format: 'date-time' }),
  },
  { $id: 'OrganizationInviteResponse' },
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
