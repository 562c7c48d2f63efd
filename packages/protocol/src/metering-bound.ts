import { findModel } from './catalogue.js';

/**
 * The most `metering_units` a node's receipt may sign for a piece of work, from what the server
 * knows of the work itself (issue 40 point 6). A receipt above it is refused, nothing is charged,
 * and the node's reputation is lowered: the signature proves who claimed the units, not that the
 * work could have taken them. Every bound leans towards the node: an honest engine never meets
 * it, so the margins below are wide on purpose (docs/receipts.md, "The metering bound").
 */

/** Tokens a message may cost beyond its text (role markers, chat template). */
const MESSAGE_OVERHEAD_TOKENS = 16;

/**
 * Tokens each engine call may count beyond its texts' bound and its completion limit: a chat
 * template's start and generation-prompt tokens, a default system prompt some templates add, an
 * end-of-sequence token counted as generated, and an engine that estimates from bytes
 * (ceil(bytes / 4) of a completion whose tokens are long). Real templates add under 64.
 */
export const TOKEN_MARGIN_PER_CALL = 256;

/**
 * Audio seconds beyond the duration the bound is given: decoders disagree on a compressed
 * file's last frame, and the engine rounds up (`ceil(duration)`).
 */
export const AUDIO_MARGIN_SECONDS = 2;

/** Seconds beyond a job's time limit: the runner's start, the grace of its kill, `ceil`. */
export const RUNTIME_MARGIN_SECONDS = 60;

/** The completion tokens a chat call may make without `max_tokens`: the model's context, at most 32,768. */
export const MAX_COMPLETION_TOKENS = 32_768;

/** The most audio a transcription job's node downloads (25 MiB) at the hold's 16 kbit/s. */
const JOB_AUDIO_SECONDS = Math.ceil((25 * 1024 * 1024) / 2_000);

/**
 * An upper bound of the tokens texts can cost: one per UTF-8 byte (no tokenizer in use makes a
 * token of less than a byte) plus template overhead per text. The gateway's holds are taken on
 * this, and the metering bound counts prompts with it.
 *
 * @example
 * promptTokenBound(['hello']); // 5 + 16
 */
export function promptTokenBound(texts: readonly string[]): number {
  return texts.reduce((sum, t) => sum + Buffer.byteLength(t, 'utf8') + MESSAGE_OVERHEAD_TOKENS, 0);
}

/**
 * The completion tokens a chat model may generate when the call names no `max_tokens`.
 *
 * @example
 * defaultCompletionTokens('tinyllama'); // 2048
 */
export function defaultCompletionTokens(model: string | null): number {
  return Math.min(findModel(model ?? '')?.context_length ?? MAX_COMPLETION_TOKENS, MAX_COMPLETION_TOKENS);
}

/** What the server knows of a piece of work that bounds its metering. */
export type MeteringSubject =
  /** Gateway chat: the messages' texts (as the node receives them) and `max_tokens`, or the model's default. */
  | { type: 'chat'; prompts: readonly string[]; maxTokens: number }
  /** Gateway embeddings: the input texts. */
  | { type: 'embeddings'; inputs: readonly string[] }
  /** Gateway images: `n`. */
  | { type: 'image'; n: number }
  /**
   * Gateway transcription: the audio's duration in seconds as the server knows it (an upper bound
   * of the file's length today; the server's own measurement when it has one).
   */
  | { type: 'transcription'; audioSeconds: number }
  /**
   * A marketplace job (DESIGN.md section 8): its kind, model and inputs (kinds 1, 2, 4), its time
   * limit (kinds 5 to 7) and the node's cores (kind 5 meters core-seconds).
   */
  | {
      type: 'job';
      kind: number;
      model: string | null;
      inputs: readonly string[];
      timeoutSeconds: number;
      cores: number;
    };

/**
 * The most metering units a receipt for `subject` may sign, or undefined when the request sets no
 * bound of its own: kinds 8 and 10, whose units the server counts itself from the outputs and the
 * capture set (a receipt with other units is refused there), and unknown kinds. Chat: the prompt
 * by {@link promptTokenBound} plus `max_tokens` plus {@link TOKEN_MARGIN_PER_CALL}; embeddings: the
 * inputs' bound plus the margin; images: `n`; transcription: the seconds plus
 * {@link AUDIO_MARGIN_SECONDS}; jobs per kind from their inputs and time limit.
 *
 * @example
 * meteringBound({ type: 'chat', prompts: ['hi'], maxTokens: 16 }); // 2 + 16 + 16 + 256 = 290
 * meteringBound({ type: 'image', n: 2 }); // 2
 */
export function meteringBound(subject: MeteringSubject): number | undefined {
  switch (subject.type) {
    case 'chat':
      return promptTokenBound(subject.prompts) + subject.maxTokens + TOKEN_MARGIN_PER_CALL;
    case 'embeddings':
      return promptTokenBound(subject.inputs) + TOKEN_MARGIN_PER_CALL;
    case 'image':
      return subject.n;
    case 'transcription':
      return Math.ceil(subject.audioSeconds) + AUDIO_MARGIN_SECONDS;
    case 'job':
      return jobBound(subject);
  }
}

function jobBound(job: Extract<MeteringSubject, { type: 'job' }>): number | undefined {
  const runtime = Math.ceil(job.timeoutSeconds) + RUNTIME_MARGIN_SECONDS;
  switch (job.kind) {
    case 1: // one chat call per input, each as long as the model may answer
      return (
        promptTokenBound(job.inputs) + job.inputs.length * (defaultCompletionTokens(job.model) + TOKEN_MARGIN_PER_CALL)
      );
    case 2: // one embedding call over every input
      return promptTokenBound(job.inputs) + TOKEN_MARGIN_PER_CALL;
    case 3: // the audio is the node's download: the most it takes, at the hold's lowest bitrate
      return JOB_AUDIO_SECONDS + AUDIO_MARGIN_SECONDS;
    case 4: // one image per prompt
      return job.inputs.length;
    case 5: // core-seconds: wall time on at most every core the node has
      return runtime * Math.max(1, job.cores);
    case 6:
    case 7: // GPU-seconds: wall time
      return runtime;
    case 9: // one run
      return 1;
    default: // 8 and 10: counted by the server itself (capture/processing.ts)
      return undefined;
  }
}
