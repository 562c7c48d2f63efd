import { Type } from '@sinclair/typebox';
import { DownloadsInfoResponseSchema } from '@svc/protocol/rest';

/** The dashboard reads it too: defined once in `@svc/protocol/rest`, named here as the route uses it. */
export const DownloadsInfoResponse = DownloadsInfoResponseSchema;

export const DownloadParams = Type.Object({ file: Type.String({ maxLength: 200 }) });
