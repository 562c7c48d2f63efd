import { describe, expect, it } from 'vitest';
import { audioSamples, PNG_BYTES } from '../../test/audio-samples.js';
import { audioUnitsFit, billedAudioSeconds, checkAudioUnits, measureAudio } from './audio.js';
import { ApiError } from './errors.js';

async function refusal(bytes: Uint8Array): Promise<string> {
  try {
    const measured = await measureAudio(bytes);
    return `measured ${measured.format} ${measured.ms} ms`;
  } catch (err) {
    if (err instanceof ApiError) return `${err.status} ${err.code}`;
    return `thrown ${String(err)}`;
  }
}

describe('the server measures audio (issue 41 point 5)', () => {
  it('reads the format and the duration of a real file of every accepted format, within 0.1 s', async () => {
    const measured = [];
    for (const sample of audioSamples()) {
      const { format, ms } = await measureAudio(sample.bytes);
      measured.push({ file: sample.file, format, close: Math.abs(ms / 1000 - sample.seconds) <= 0.1 });
    }
    expect(measured).toEqual(audioSamples().map((s) => ({ file: s.file, format: s.format, close: true })));
  });

  it('refuses what is not audio with 415: a PNG, text, nothing', async () => {
    expect(await refusal(PNG_BYTES)).toBe('415 unsupported_media_type');
    expect(await refusal(Buffer.from('this is not audio at all'))).toBe('415 unsupported_media_type');
    expect(await refusal(Buffer.alloc(0))).toBe('415 unsupported_media_type');
    expect(await refusal(Buffer.from('%PDF-1.7\n'))).toBe('415 unsupported_media_type');
  });

  it('answers a truncated or corrupt file with 415 or 400, never anything else', async () => {
    const outcomes = new Set<string>();
    for (const { bytes } of audioSamples()) {
      for (const cut of [4, 12, 40, 200, Math.floor(bytes.length / 2)]) {
        const outcome = await refusal(bytes.subarray(0, cut));
        outcomes.add(outcome.startsWith('measured') ? 'measured' : outcome);
      }
      // The header kept, everything after it noise.
      const noisy = Buffer.from(bytes);
      for (let i = 64; i < noisy.length; i++) noisy[i] = (i * 7919) & 0xff;
      const outcome = await refusal(noisy);
      outcomes.add(outcome.startsWith('measured') ? 'measured' : outcome);
    }
    // A header that states the length (FLAC, MP3's Xing frame) still measures; nothing else gets through.
    expect(
      [...outcomes].filter((o) => !['measured', '415 unsupported_media_type', '400 invalid_request'].includes(o)),
    ).toEqual([]);
    expect(outcomes.has('415 unsupported_media_type')).toBe(true);
  });

  it('bills per started second and accepts units within 1 s of the measurement', () => {
    expect([billedAudioSeconds(2_500), billedAudioSeconds(3_000), billedAudioSeconds(1)]).toEqual([3, 3, 1]);
    // (units - 1, units] must reach within 1 s of the audio's 2.5 s.
    expect([1, 2, 3, 4, 5, 8].map((units) => [units, audioUnitsFit(2_500, units)])).toEqual([
      [1, false],
      [2, true],
      [3, true],
      [4, true],
      [5, false],
      [8, false],
    ]);
    expect(() => checkAudioUnits(7_608, 3)).toThrow(/differs from the server's measurement of the audio \(7\.608 s\)/);
    expect(() => checkAudioUnits(7_608, 8)).not.toThrow();
  });
});
