/**
 * The duration in seconds of a RIFF/WAVE file: the `data` chunk's size over the `fmt ` chunk's
 * byte rate. `undefined` when the bytes are not a WAV file this can read. A `data` size of
 * 0xFFFFFFFF (written by streaming encoders) or past the end counts the bytes present.
 *
 * @example
 * wavDurationSeconds(wav16kMono2500ms); // 2.5
 */
export function wavDurationSeconds(bytes: Uint8Array): number | undefined {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (buf.length < 12 || buf.toString('latin1', 0, 4) !== 'RIFF' || buf.toString('latin1', 8, 12) !== 'WAVE') {
    return undefined;
  }
  let byteRate: number | undefined;
  let offset = 12;
  while (offset + 8 <= buf.length) {
    const id = buf.toString('latin1', offset, offset + 4);
    const size = buf.readUInt32LE(offset + 4);
    const body = offset + 8;
    if (id === 'fmt ' && body + 16 <= buf.length) {
      const channels = buf.readUInt16LE(body + 2);
      const sampleRate = buf.readUInt32LE(body + 4);
      const declared = buf.readUInt32LE(body + 8);
      const blockAlign = buf.readUInt16LE(body + 12);
      byteRate = declared > 0 ? declared : sampleRate * (blockAlign || channels * 2);
    } else if (id === 'data') {
      if (byteRate === undefined || byteRate === 0) return undefined;
      const present = Math.min(size, buf.length - body);
      return present / byteRate;
    }
    // Chunks are padded to an even size.
    offset = body + size + (size % 2);
  }
  return undefined;
}
