import type { PlatformServices } from '../../platform/services.js';
import { measureAudio } from '../../platform/audio.js';
import { ApiError } from '../../platform/errors.js';
import type { CountedInputs } from './estimate.js';

/**
 * A job's inputs as the server reads them at submission and for an estimate: the lines of
 * `inline_text` or of the `payload_url` document (kinds 1, 2 and 4), and the audio of a
 * transcription's `payload_url`, measured (kind 3). Every download goes through the egress
 * guard and stops at its size limit: nothing past it is read.
 */

const MAX_INPUTS = 10_000;
const MAX_DOCUMENT_BYTES = 10 * 1024 * 1024;
/** The audio limit of a transcription (DESIGN.md section 10), the node's own download limit too. */
const MAX_AUDIO_BYTES = 25 * 1024 * 1024;
const FETCH_TIMEOUT_MS = 30_000;

const bad = (path: string, message: string) =>
  new ApiError('invalid_request', `${path.slice(1)} ${message}`, [{ path, message }]);

/** Downloads `url` through the egress guard, refusing it (400) once it passes `maxBytes`. */
async function download(ctx: PlatformServices, url: string, maxBytes: number, what: string): Promise<Buffer> {
  await ctx.egress.checkUrl(url, '/payload_url');
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    const res = await ctx.egress.fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), redirect: 'error' });
    if (!res.ok) {
      await res.body?.cancel();
      throw bad('/payload_url', `answered HTTP ${res.status}`);
    }
    const declared = Number(res.headers.get('content-length') ?? '0');
    if (!res.body || declared > maxBytes) {
      await res.body?.cancel();
      if (declared > maxBytes) throw bad('/payload_url', `${what} is larger than ${maxBytes} bytes`);
      return Buffer.alloc(0);
    }
    for await (const chunk of res.body) {
      size += chunk.byteLength;
      // Leaving the loop cancels the body: the rest is never read.
      if (size > maxBytes) throw bad('/payload_url', `${what} is larger than ${maxBytes} bytes`);
      chunks.push(chunk);
    }
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw bad('/payload_url', `could not be fetched: ${err instanceof Error ? err.message : String(err)}`);
  }
  return Buffer.concat(chunks, size);
}

function linesOf(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter(Boolean);
}

/** The fields of a job request (or an estimate request) that name its inputs. */
export interface InputFields {
  kind: number;
  inline_text?: string | undefined;
  payload_url?: string | undefined;
}

/**
 * Reads and counts a job's inputs. With `required` (a submission), a kind 1, 2 or 4 job without
 * `inline_text` or `payload_url`, or a transcription without `payload_url`, is a 400; an estimate
 * without them counts nothing. Text inputs: at least one non-empty line, at most 10,000. Audio:
 * 25 MiB at most, measured by the server (415 when it is not audio).
 *
 * @example
 * await countInputs(ctx, { kind: 4, inline_text: 'a fox\na hen' }, true); // { inputs: ['a fox', 'a hen'] }
 */
export async function countInputs(ctx: PlatformServices, body: InputFields, required: boolean): Promise<CountedInputs> {
  const name = body.kind === 3 ? 'transcription' : `kind ${body.kind}`;
  if (body.kind === 1 || body.kind === 2 || body.kind === 4) {
    if (!body.inline_text && !body.payload_url) {
      if (!required) return {};
      throw bad('/inline_text', `or payload_url is required for ${name} (one input per line)`);
    }
    const text =
      body.inline_text ||
      (await download(ctx, body.payload_url ?? '', MAX_DOCUMENT_BYTES, 'document')).toString('utf8');
    const inputs = linesOf(text);
    if (inputs.length === 0)
      throw bad(body.inline_text ? '/inline_text' : '/payload_url', 'has no non-empty line to process');
    if (inputs.length > MAX_INPUTS) throw bad('/inline_text', `has more than ${MAX_INPUTS} lines`);
    return { inputs };
  }
  if (body.kind === 3) {
    if (!body.payload_url) {
      if (!required) return {};
      throw bad('/payload_url', 'is required for transcription (the audio file)');
    }
    const audio = await download(ctx, body.payload_url, MAX_AUDIO_BYTES, 'the audio');
    return { audioMs: (await measureAudio(audio, '/payload_url')).ms };
  }
  return {};
}
