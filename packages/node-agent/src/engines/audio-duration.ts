import { parseBuffer } from 'music-metadata';

/**
 * The duration in seconds of an audio file of any format the platform transcribes (WAV, MP3,
 * FLAC, OGG, M4A, WebM), measured with `music-metadata`, the parser the server measures the same
 * upload with: an engine whose upstream reports no duration (a plain `json` or `text` answer)
 * still signs the figure the server will check its receipt against (DESIGN.md section 10: more
 * than one second away from the server's measurement is refused). `undefined` when the bytes are
 * no audio it can read.
 *
 * @example
 * await audioDurationSeconds(mp3Bytes); // 3.276
 */
export async function audioDurationSeconds(bytes: Uint8Array): Promise<number | undefined> {
  try {
    const { format } = await parseBuffer(bytes, undefined, { duration: true, skipCovers: true, skipPostHeaders: true });
    return format.duration !== undefined && Number.isFinite(format.duration) && format.duration > 0
      ? format.duration
      : undefined;
  } catch {
    return undefined;
  }
}
