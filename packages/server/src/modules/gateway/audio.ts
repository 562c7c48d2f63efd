import { meteringBound, usageCostMicro } from '@svc/protocol';
import { billedAudioSeconds, measureAudio } from '../../platform/audio.js';
import { ApiError } from '../../platform/errors.js';
import { MEASURED_AUDIO_MS } from './measured-audio.js';
import { requestId, svcNode, type Finished, type GatewayCall } from './service.js';
import { requireModel } from './models.js';

/** The audio upload limit (DESIGN.md section 10). */
export const MAX_AUDIO_BYTES = 25 * 1024 * 1024;

export type AudioFormat = 'wav' | 'mp3' | 'flac' | 'm4a' | 'webm';
export type TranscriptFormat = 'json' | 'text' | 'verbose_json';

/**
 * The audio format of a file from its first bytes, whatever its name or declared type says:
 * WAV `RIFF....WAVE`, MP3 an `ID3` tag or an MPEG audio frame sync, FLAC `fLaC`, M4A an ISO
 * `ftyp` box, WebM the EBML magic `1A 45 DF A3`. Undefined for anything else (415).
 *
 * @example
 * sniffAudio(Buffer.from('fLaC\0\0\0\x22', 'latin1')); // 'flac'
 */
export function sniffAudio(bytes: Buffer): AudioFormat | undefined {
  if (bytes.length >= 12 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WAVE')
    return 'wav';
  if (bytes.length >= 4 && bytes.toString('latin1', 0, 4) === 'fLaC') return 'flac';
  if (bytes.length >= 8 && bytes.toString('latin1', 4, 8) === 'ftyp') return 'm4a';
  if (bytes.length >= 4 && bytes[0] === 0x1a && bytes[1] === 0x45 && bytes[2] === 0xdf && bytes[3] === 0xa3)
    return 'webm';
  if (bytes.length >= 3 && bytes.toString('latin1', 0, 3) === 'ID3') return 'mp3';
  // MPEG audio frame: 11 sync bits, a version other than "reserved", a layer other than 0 (ADTS AAC).
  const b1 = bytes[1] ?? 0;
  if (bytes.length >= 4 && bytes[0] === 0xff && (b1 & 0xe0) === 0xe0 && ((b1 >> 3) & 3) !== 1 && ((b1 >> 1) & 3) !== 0)
    return 'mp3';
  return undefined;
}

export interface TranscriptionCall extends GatewayCall {
  format: TranscriptFormat;
  /** The audio's duration as the server measured it: billed, and answered as `duration`. */
  audioMs: number;
}

const bad = (field: string, message: string) =>
  new ApiError('invalid_request', `${field} ${message}`, [{ path: `/${field}`, message }]);

/**
 * Validates the form fields and the file of `POST /v1/audio/transcriptions` and builds the call.
 * The server measures the audio (platform/audio.ts: 415 when it is not WAV, MP3, FLAC, OGG, M4A
 * or WebM audio): its duration is what the request holds and is billed (0.006 CAD per minute,
 * per started second) and what the node's receipt must match within 1 s. The audio travels to
 * the node base64 in the work payload.
 *
 * @example
 * await prepareTranscription({ model: 'whisper-base' }, { bytes: wav, filename: 'a.wav' });
 */
export async function prepareTranscription(
  fields: Record<string, string>,
  file: { bytes: Buffer; filename: string } | undefined,
): Promise<TranscriptionCall> {
  if (!file) throw bad('file', 'is required (multipart field "file")');
  const modelId = fields.model;
  if (modelId === undefined) throw bad('model', 'is required');
  const model = requireModel(modelId, 'transcription');
  const format = (fields.response_format ?? 'json') as TranscriptFormat;
  if (!['json', 'text', 'verbose_json'].includes(format))
    throw bad('response_format', 'must be one of "json", "text", "verbose_json"');
  const language = fields.language;
  if (language !== undefined && !/^[a-z]{2,3}$/.test(language))
    throw bad('language', 'must be an ISO 639-1 code such as "en"');
  for (const field of ['jurisdiction', 'strict_jurisdiction'] as const) {
    const value = fields[field];
    if (value !== undefined && !/^[A-Z]{2}$/.test(value))
      throw bad(field, 'must be an ISO 3166-1 alpha-2 code in upper case');
  }
  const tee = fields.requires_tee;
  if (tee !== undefined && tee !== 'true' && tee !== 'false') throw bad('requires_tee', 'must be true or false');
  if (file.bytes.length === 0) throw bad('file', 'is empty');
  const audio = await measureAudio(file.bytes);
  const seconds = audio.ms / 1000;
  return {
    id: requestId('tr'),
    type: 'transcription',
    model: model.id,
    payload: {
      model: model.id,
      audio_base64: file.bytes.toString('base64'),
      filename: `audio.${audio.format}`,
      format: audio.format,
      ...(language ? { language } : {}),
    },
    stream: false,
    route: {
      jurisdiction: fields.jurisdiction,
      strict_jurisdiction: fields.strict_jurisdiction,
      requires_tee: tee === 'true',
    },
    maxMicro: usageCostMicro(model.id, { audio_seconds: billedAudioSeconds(audio.ms) }),
    // The node's receipt may sign the audio's seconds and a margin, no more (issue 40 point 6).
    maxUnits: meteringBound({ type: 'transcription', audioSeconds: seconds }),
    audit: { [MEASURED_AUDIO_MS]: audio.ms },
    format,
    audioMs: audio.ms,
  };
}

interface TranscriptOutput {
  text: string;
  language: string;
  duration: number;
  segments: { start: number; end: number; text: string }[];
}

/** The response body for the asked `response_format`: `{text}`, plain text, or verbose JSON. */
export function transcriptionView(
  call: TranscriptionCall,
  done: Finished,
): { text: string; [field: string]: unknown } | string {
  let out: Partial<TranscriptOutput>;
  try {
    out = JSON.parse(done.output.toString('utf8')) as Partial<TranscriptOutput>;
  } catch {
    throw new ApiError('upstream_error', 'the node returned a transcription that is not JSON');
  }
  if (typeof out.text !== 'string')
    throw new ApiError('upstream_error', 'the node returned a transcription without text');
  if (call.format === 'text') return `${out.text}\n`;
  if (call.format === 'json') return { text: out.text };
  const segments = Array.isArray(out.segments) ? out.segments : [];
  return {
    task: 'transcribe',
    language: typeof out.language === 'string' ? out.language : 'unknown',
    // The server's measurement, the duration billed (the node's own is in its receipt).
    duration: call.audioMs / 1000,
    text: out.text,
    segments: segments.map((s, id) => ({ id, start: s.start, end: s.end, text: s.text })),
    svc_node: svcNode(done.attempt.node),
    svc_receipt_id: done.receiptId,
  };
}
