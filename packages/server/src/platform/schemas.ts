import { Type } from '@sinclair/typebox';

/**
 * Schema pieces every module's routes share. They sit below the modules so that any module can
 * use them without depending on another (they lived in modules/auth/schemas.ts, which made every
 * module that needed one depend on auth).
 */

/** A string enum that validates as `enum` (one clear error): one definition, with the REST shapes in `@svc/protocol/rest`. */
export { StringEnum } from '@svc/protocol/rest';

/** The body of an answer that only says what happened; registered once by modules/auth's routes. */
export const MessageResponse = Type.Object({ message: Type.String() }, { $id: 'MessageResponse' });
