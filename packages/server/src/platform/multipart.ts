import type { MultipartFile } from '@fastify/multipart';

/** The answer to a form past a limit closes the connection: the rest of the body is never read. */
export const CLOSE_CONNECTION = { connection: 'close' };

/**
 * A multipart file part's bytes, failing (code `FST_REQ_FILE_TOO_LARGE`) as soon as the part
 * passes its size limit. `toBuffer()` alone waits for the part's end, which a client past the
 * limit need never send: the parser would discard its bytes for as long as it kept sending.
 *
 * @example
 * for await (const part of request.parts()) if (part.type === 'file') bytes = await filePartBytes(part);
 */
export async function filePartBytes(part: MultipartFile): Promise<Buffer> {
  const tooLarge = () =>
    part.file.destroy(Object.assign(new Error('the file is past its size limit'), { code: 'FST_REQ_FILE_TOO_LARGE' }));
  // The limit may be passed before the part reaches us (its first bytes came with the head).
  if (part.file.truncated) tooLarge();
  else part.file.once('limit', tooLarge);
  return part.toBuffer();
}
