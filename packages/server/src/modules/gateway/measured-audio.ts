import type { ModelUsage } from '@svc/protocol';
import { audioUnitsFit, billedAudioSeconds, checkAudioUnits } from '../../platform/audio.js';
import { usageFromUnits } from './pricing.js';
import type { GatewayRequestRow } from './store.js';

/**
 * A transcription's audio as the server measured it (DESIGN.md section 10): kept with the request
 * among its audit facts (`measured_audio_ms`, copied into its receipt's metadata beside the node's
 * signed units), billed instead of the node's figure, and the yardstick of the node's receipt.
 */

type Measured = Pick<GatewayRequestRow, 'type' | 'metadata'>;

/** The audit fact the measurement is kept under. */
export const MEASURED_AUDIO_MS = 'measured_audio_ms';

/**
 * The server's measurement of a transcription's audio in milliseconds; undefined for another
 * request, or one opened without it (rebuilt from a work ticket: its hold, taken on the
 * measurement, caps its charge).
 *
 * @example
 * measuredAudioMs({ type: 'transcription', metadata: { audit: { measured_audio_ms: 2_500 } } }); // 2500
 */
export function measuredAudioMs(request: Measured): number | undefined {
  if (request.type !== 'transcription') return undefined;
  const audit = request.metadata.audit;
  if (typeof audit !== 'object' || audit === null) return undefined;
  const ms = (audit as Record<string, unknown>)[MEASURED_AUDIO_MS];
  return typeof ms === 'number' ? ms : undefined;
}

/**
 * The usage a request is charged: a measured transcription's billed seconds (a started second
 * counts), whatever its receipt says; else what its receipt's units stand for (`usageFromUnits`).
 *
 * @example
 * requestUsage({ type: 'transcription', metadata: { audit: { measured_audio_ms: 2_500 } } }, 4, null); // { audio_seconds: 3 }
 */
export function requestUsage(request: Measured, units: number, reported: Record<string, unknown> | null): ModelUsage {
  const ms = measuredAudioMs(request);
  if (ms !== undefined) return { audio_seconds: billedAudioSeconds(ms) };
  return usageFromUnits(request.type, units, reported);
}

/** Whether a receipt's units fit the request's measured audio (always, for anything else). */
export function unitsFitAudio(request: Measured, units: number): boolean {
  const ms = measuredAudioMs(request);
  return ms === undefined || audioUnitsFit(ms, units);
}

/** Refuses (400) a receipt whose audio seconds are more than 1 s from the request's measured audio. */
export function checkRequestAudio(request: Measured, units: number): void {
  const ms = measuredAudioMs(request);
  if (ms !== undefined) checkAudioUnits(ms, units);
}
