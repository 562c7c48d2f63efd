import { Type } from '@sinclair/typebox';
import { AuthResponseSchema, MeResponseSchema, OrganizationContextSchema, RoleSchema } from '@svc/protocol/rest';

/** Shapes the dashboard reads too: defined once in `@svc/protocol/rest`, named here as the routes use them. */
export { RoleSchema };
export const OrganizationContext = OrganizationContextSchema;
export const AuthResponse = AuthResponseSchema;
export const MeResponse = MeResponseSchema;

export const Email = Type.String({
  format: 'email',
  maxLength: 254,
  description: 'email address; stored trimmed and lower-cased',
});
export const Password = Type.String({ minLength: 1, maxLength: 256, description: 'at least 10 characters' });
export const AuthRequest = Type.Object(
  { email: Email, password: Password, name: Type.Optional(Type.String({ maxLength: 200 })) },
  { $id: 'AuthRequest', additionalProperties: false },
);
