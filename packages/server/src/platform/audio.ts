import { parseBuffer } from 'music-metadata';
import { ApiError } from './errors.js';

/**
 * Audio as the server measures it (DESIGN.md section 10): the billed duration of a transcription,
 * gateway or kind 3 job, is the server's own measurement of the upload, never the node's. The
 * parser is `music-metadata` (a maintained one), reading the whole buffer the caller already
 * bounded (25 MiB): headers where the format has them (WAV, FLAC, MP4, WebM, an MP3's Xing
 * frame), the frames or pages otherwise.
 */

/** The formats the platform transcribes, by the container their bytes show (not their name). */
export type AudioFormat = 'wav' | 'mp3' | 'flac' | 'ogg' | 'm4a' | 'webm';

export interface MeasuredAudio {
  format: AudioFormat;
  /** The duration in whole milliseconds, rounded: what estimates, bounds and bills read. */
  ms: number;
}

const ACCEPTED = 'send WAV, MP3, FLAC, OGG, M4A or WebM audio (recognised by content)';

function formatOf(container: string | undefined, codec: string | undefined): AudioFormat | undefined {
  if (container === 'WAVE') return 'wav';
  // MPEG audio: layer 3 (MP3); the container says MPEG for layers 1 and 2 too.
  if (container === 'MPEG') return codec?.includes('Layer 3') ? 'mp3' : undefined;
  if (container === 'FLAC') return 'flac';
  if (container === 'Ogg') return 'ogg';
  if (container?.startsWith('M4A/')) return 'm4a';
  if (container === 'EBML/webm') return 'webm';
  return undefined;
}

/**
 * Measures an audio file: its format and duration. Throws `unsupported_media_type` (415) for
 * anything that is not one of the accepted formats, or whose duration cannot be read (a truncated
 * or corrupt file, a video without sound), and `invalid_request` (400) for audio of no length.
 * Never throws anything else: a parser failure on hostile bytes is the upload's fault.
 *
 * @example
 * const { format, ms } = await measureAudio(await readFile('tone-4.1s.flac')); // { format: 'flac', ms: 4100 }
 */
export async function measureAudio(bytes: Uint8Array, path = '/file'): Promise<MeasuredAudio> {
  let parsed: Awaited<ReturnType<typeof parseBuffer>>;
  try {
    parsed = await parseBuffer(bytes, undefined, { duration: true, skipCovers: true, skipPostHeaders: true });
  } catch (err) {
    const why = err instanceof Error ? err.message : 'unreadable';
    throw new ApiError('unsupported_media_type', `the file is not audio this platform reads (${why}): ${ACCEPTED}`, [
      { path, message: 'not readable audio' },
    ]);
  }
  const { container, codec, duration, sampleRate } = parsed.format;
  const format = formatOf(container, codec);
  if (!format)
    throw new ApiError('unsupported_media_type', `the file is ${container ?? 'of no known format'}: ${ACCEPTED}`, [
      { path, message: 'not an accepted audio format' },
    ]);
  if (duration === undefined || !Number.isFinite(duration) || !sampleRate)
    throw new ApiError(
      'unsupported_media_type',
      `the ${format} file has no audio whose duration can be read (truncated or corrupt?): ${ACCEPTED}`,
      [{ path, message: 'no measurable audio' }],
    );
  const ms = Math.round(duration * 1000);
  if (ms <= 0)
    throw new ApiError('invalid_request', `the ${format} file holds no audio (0 s)`, [
      { path, message: 'empty audio' },
    ]);
  return { format, ms };
}

/**
 * The whole seconds audio of `ms` is billed: a started second counts (DESIGN.md section 7).
 *
 * @example
 * billedAudioSeconds(2_500); // 3
 */
export function billedAudioSeconds(ms: number): number {
  return Math.ceil(ms / 1000);
}

/** How far, in seconds, a node's duration may be from the server's measurement (DESIGN.md section 10). */
export const AUDIO_TOLERANCE_SECONDS = 1;

/**
 * Whether a receipt's `metering_units` (whole audio seconds, the node's duration rounded up) can
 * stand for the server's measurement of `ms`: some duration in (units - 1, units] lies within
 * {@link AUDIO_TOLERANCE_SECONDS} of it. An honest engine's `ceil(duration)` always does.
 *
 * @example
 * audioUnitsFit(2_500, 3); // true
 * audioUnitsFit(2_500, 8); // false: 5 s more than the audio
 */
export function audioUnitsFit(ms: number, units: number): boolean {
  const seconds = ms / 1000;
  return units >= seconds - AUDIO_TOLERANCE_SECONDS && units - 1 < seconds + AUDIO_TOLERANCE_SECONDS;
}

/**
 * Refuses a receipt whose audio seconds differ from the server's measurement by more than
 * {@link AUDIO_TOLERANCE_SECONDS} (400 naming `/metering_units`); nothing is charged.
 *
 * @example
 * checkAudioUnits(2_500, 3); // passes
 */
export function checkAudioUnits(ms: number, units: number): void {
  if (audioUnitsFit(ms, units)) return;
  throw new ApiError(
    'invalid_request',
    `metering_units ${units} differs from the server's measurement of the audio (${(ms / 1000).toFixed(3)} s) by more than ${AUDIO_TOLERANCE_SECONDS} s; the receipt is refused`,
    [{ path: '/metering_units', message: "differs from the server's measurement of the audio" }],
  );
}
