import { Type } from '@sinclair/typebox';
import { RoleSchema } from './auth.js';
import { DateTime, StringEnum } from './common.js';

export const OrganizationSchema = Type.Object(
  { id: Type.String(), name: Type.String(), created_at: DateTime },
  { $id: 'Organization' },
);

export const OrganizationMemberSchema = Type.Object(
  { buyer_id: Type.String(), email: Type.String(), name: Type.String(), created_at: DateTime, role: RoleSchema },
  { $id: 'OrganizationMember' },
);

/** The answer to `GET /api/v1/organizations/current`. */
export const OrganizationResponseSchema = Type.Object(
  { organization: Type.Ref(OrganizationSchema), member: Type.Ref(OrganizationMemberSchema) },
  { $id: 'OrganizationResponse' },
);

/** The answer to `GET /api/v1/organizations/current/members`. */
export const OrganizationMembersResponseSchema = Type.Object(
  { organization: Type.Ref(OrganizationSchema), members: Type.Array(Type.Ref(OrganizationMemberSchema)) },
  { $id: 'OrganizationMembersResponse' },
);

/** The answer to `POST /api/v1/organizations/current/invites`. */
export const OrganizationInviteResponseSchema = Type.Object(
  {
    organization: Type.Ref(OrganizationSchema),
    email: Type.String(),
    role: StringEnum(['admin', 'member'] as const),
    invite_token: Type.String({ description: 'single use; valid 7 days' }),
    accept_url: Type.String(),
    expires_at: DateTime,
  },
  { $id: 'OrganizationInviteResponse' },
);
