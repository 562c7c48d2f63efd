import { readFileSync } from 'node:fs';
import type { AudioFormat } from '../src/platform/audio.js';

/** One generated sample per accepted format (test/audio/README.md): its bytes and the tone's length. */
export interface AudioSample {
  format: AudioFormat;
  file: string;
  seconds: number;
  bytes: Buffer;
}

const SAMPLES: [AudioFormat, string, number][] = [
  ['wav', 'tone-2.5s.wav', 2.5],
  ['mp3', 'tone-3.2s.mp3', 3.2],
  ['flac', 'tone-4.1s.flac', 4.1],
  ['ogg', 'tone-5.3s.ogg', 5.3],
  ['m4a', 'tone-6.4s.m4a', 6.4],
  ['webm', 'tone-7.6s.webm', 7.6],
];

/**
 * The audio samples the tests measure and upload, read from this folder (never from outside the
 * repository).
 *
 * @example
 * const [wav] = audioSamples(); // { format: 'wav', file: 'tone-2.5s.wav', seconds: 2.5, bytes }
 */
export function audioSamples(): AudioSample[] {
  return SAMPLES.map(([format, file, seconds]) => ({
    format,
    file,
    seconds,
    bytes: readFileSync(new URL(`./audio/${file}`, import.meta.url)),
  }));
}

/** A PNG's first bytes: an image, not audio. */
export const PNG_BYTES = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');
