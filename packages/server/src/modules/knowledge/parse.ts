import { Worker } from 'node:worker_threads';
import { ApiError } from '../../platform/errors.js';
import { chunkText, type TextChunk } from './chunking.js';
import { extractText, type DocumentFormat } from './extract.js';

/**
 * Extraction and chunking of one document, bounded: a nesting depth checked before parsing, caps
 * on the extracted text and the chunk count, and (in a worker thread) a heap limit and a deadline.
 * A document beyond any of them fails with a reason the document shows; the server process is
 * never the one that runs out of memory. docs/security.md ("Ingestion limits") lists the values.
 */

export interface ParseLimits {
  /** Deepest Markdown list or quote nesting accepted. */
  maxNesting: number;
  /** Most characters of extracted text. */
  maxTextChars: number;
  /** Most chunks one document may produce. */
  maxChunks: number;
  /** Heap of the worker thread (resourceLimits.maxOldGenerationSizeMb). */
  heapMb: number;
  /** Wall-clock time a parse may take, worker start included. */
  timeoutMs: number;
  /** `worker` (default) or `inline`: in the server process, without heap limit or deadline (debugging only). */
  isolation: 'worker' | 'inline';
}

export interface ParseInput {
  bytes: Uint8Array;
  format: DocumentFormat;
  chunkSize: number;
  chunkOverlap: number;
}

export interface ParsedDocument {
  textChars: number;
  pages?: number;
  chunks: TextChunk[];
}

/** A document refused by a limit: the message is what the document's `error` says. */
const refused = (message: string) => new ApiError('invalid_request', message);

/**
 * The deepest nesting of Markdown lists and block quotes, estimated from indentation (a nested list
 * item is indented at least two columns more than its parent) and `>` markers, without parsing.
 */
export function markdownNesting(text: string): number {
  let deepest = 0;
  let lineStart = 0;
  while (lineStart <= text.length) {
    let i = lineStart;
    let columns = 0;
    let quotes = 0;
    for (; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === 0x20) columns++;
      else if (c === 0x09) columns += 4 - (columns % 4);
      else if (c === 0x3e) quotes++;
      else break;
    }
    deepest = Math.max(deepest, Math.floor(columns / 2), quotes);
    const next = text.indexOf('\n', i);
    if (next < 0) break;
    lineStart = next + 1;
  }
  return deepest;
}

/** The bounded parse itself (what the worker runs). Throws invalid_request naming the limit. */
export async function parseBounded(
  input: ParseInput,
  limits: Pick<ParseLimits, 'maxNesting' | 'maxTextChars' | 'maxChunks'>,
): Promise<ParsedDocument> {
  const bytes = Buffer.from(input.bytes.buffer, input.bytes.byteOffset, input.bytes.byteLength);
  if (input.format === 'text/markdown') {
    const depth = markdownNesting(bytes.toString('utf8'));
    if (depth > limits.maxNesting)
      throw refused(
        `the document nests about ${depth} levels deep (lists, quotes or indentation); the limit is ${limits.maxNesting}`,
      );
  }
  let extracted: { text: string; pages?: number };
  try {
    extracted = await extractText(bytes, input.format);
  } catch (err) {
    if (err instanceof RangeError && /call stack/i.test(err.message))
      throw refused('the document is nested too deeply to parse');
    throw err;
  }
  const { text, pages } = extracted;
  if (text.length > limits.maxTextChars)
    throw refused(`the document's text is ${text.length} characters; the limit is ${limits.maxTextChars}`);
  const chunks = await chunkText(text, { size: input.chunkSize, overlap: input.chunkOverlap });
  if (chunks.length > limits.maxChunks)
    throw refused(`the document makes ${chunks.length} chunks; the limit is ${limits.maxChunks}`);
  return { textChars: text.length, ...(pages === undefined ? {} : { pages }), chunks };
}

type WorkerAnswer = { ok: true; parsed: ParsedDocument } | { ok: false; message: string; refused: boolean };

const BOOT = new URL('./parse-boot.mjs', import.meta.url);
const ENTRY = new URL(`./parse-worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url);

/**
 * Extracts and chunks a document within `limits`: in a worker thread with its own heap limit and
 * a deadline (terminated when it passes), unless `isolation` is `inline`.
 *
 * @example
 * const { chunks } = await parseDocument({ bytes, format: 'text/markdown', chunkSize: 512, chunkOverlap: 64 }, limits);
 */
export function parseDocument(input: ParseInput, limits: ParseLimits): Promise<ParsedDocument> {
  if (limits.isolation === 'inline') return parseBounded(input, limits);
  return new Promise<ParsedDocument>((resolve, reject) => {
    const worker = new Worker(BOOT, {
      workerData: { entry: ENTRY.href },
      resourceLimits: {
        maxOldGenerationSizeMb: limits.heapMb,
        maxYoungGenerationSizeMb: Math.max(8, Math.floor(limits.heapMb / 8)),
        stackSizeMb: 4,
      },
      stdout: false,
      stderr: false,
    });
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      fn();
      void worker.terminate();
    };
    const deadline = setTimeout(
      () => settle(() => reject(refused(`parsing the document took longer than ${limits.timeoutMs} ms`))),
      limits.timeoutMs,
    );
    worker.once('message', (answer: WorkerAnswer) =>
      settle(() =>
        answer.ok
          ? resolve(answer.parsed)
          : reject(answer.refused ? refused(answer.message) : new Error(answer.message)),
      ),
    );
    worker.once('error', (err: Error & { code?: string }) =>
      settle(() =>
        reject(
          err.code === 'ERR_WORKER_OUT_OF_MEMORY'
            ? refused(`parsing the document needed more than ${limits.heapMb} MB of memory`)
            : err,
        ),
      ),
    );
    worker.once('exit', (code) => settle(() => reject(new Error(`the document parser stopped (exit code ${code})`))));
    const { format, chunkSize, chunkOverlap } = input;
    worker.postMessage({
      input: { bytes: input.bytes, format, chunkSize, chunkOverlap },
      limits: { maxNesting: limits.maxNesting, maxTextChars: limits.maxTextChars, maxChunks: limits.maxChunks },
    });
  });
}
