import { billedAudioSeconds, checkAudioUnits } from '../../platform/audio.js';
import type { JobRow } from './store.js';

/**
 * The units a job's receipt is charged for: a transcription's (kind 3) are the seconds the server
 * measured in its audio at submission, and its receipt is refused (400, nothing charged) when its
 * `metering_units` are more than 1 s away from them (DESIGN.md section 10); any other job's are
 * the receipt's own.
 *
 * @example
 * billedJobUnits({ kind: 3, spec: { ...spec, measured_audio_ms: 2_500 } }, 3); // 3
 * billedJobUnits({ kind: 3, spec: { ...spec, measured_audio_ms: 2_500 } }, 8); // throws invalid_request
 */
export function billedJobUnits(job: Pick<JobRow, 'kind' | 'spec'>, units: number): number {
  const ms = job.kind === 3 ? job.spec.measured_audio_ms : undefined;
  if (ms === undefined) return units;
  checkAudioUnits(ms, units);
  return billedAudioSeconds(ms);
}
