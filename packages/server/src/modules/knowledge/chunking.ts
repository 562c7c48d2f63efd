import { countTokens as countCl100k } from 'gpt-tokenizer/encoding/cl100k_base';

/**
 * Token-aware chunking with overlap, as pure functions. A document's text is cut at the most
 * natural boundary that keeps pieces under the size (paragraph, line, sentence, then word, and
 * characters only for a "word" longer than a whole chunk), the pieces are packed into chunks of
 * at most `size` tokens, and each chunk begins with the last whole sentences (up to `overlap`
 * tokens) of the one before, so that a fact cut by a boundary is whole in one of them.
 */

export interface ChunkOptions {
  /** Most tokens in a chunk. */
  size: number;
  /** Tokens of the previous chunk's end repeated at the start of the next (at most size / 2). */
  overlap: number;
}

/** One chunk: its text (a slice of the source text), its token count and where it lies in the source. */
export interface TextChunk {
  text: string;
  tokens: number;
  start: number;
  end: number;
}

export type TokenCounter = (text: string) => number;

const NO_SPECIAL = { disallowedSpecial: new Set<string>() };

/**
 * Tokens of a text in OpenAI's cl100k_base encoding: a model-independent count close to what
 * embedding and chat models see. Special-token markers in documents count as plain text.
 *
 * @example
 * countTokens('hello world'); // 2
 */
export function countTokens(text: string): number {
  return countCl100k(text, NO_SPECIAL);
}

interface Piece {
  start: number;
  end: number;
  tokens: number;
}

/** Paragraphs, lines, sentences, words: each level splits what the one before left too long. */
const SEPARATORS = [/\n[ \t]*\n\s*/g, /\n\s*/g, /(?<=[.!?;:\u3002\uff01\uff1f])\s+/g, /\s+/g];
/** Pieces are always cut down to sentences, so that overlaps can carry whole sentences. */
const SENTENCE_LEVEL = 2;
/** What joining two pieces with whitespace may add to their token counts. */
const JOIN_TOKENS = 1;

function spans(text: string, start: number, end: number, separator: RegExp): { start: number; end: number }[] {
  const out: { start: number; end: number }[] = [];
  const re = new RegExp(separator.source, 'g');
  const slice = text.slice(start, end);
  let at = 0;
  for (let m = re.exec(slice); m; m = re.exec(slice)) {
    if (m[0].length === 0) {
      re.lastIndex++;
      continue;
    }
    pushTrimmed(out, slice, start, at, m.index);
    at = m.index + m[0].length;
  }
  pushTrimmed(out, slice, start, at, slice.length);
  return out;
}

/** Adds `slice[from, to)` without its leading and trailing whitespace, unless it is blank. */
function pushTrimmed(
  out: { start: number; end: number }[],
  slice: string,
  offset: number,
  from: number,
  to: number,
): void {
  let a = from;
  let b = to;
  while (a < b && /\s/.test(slice[a] ?? '')) a++;
  while (b > a && /\s/.test(slice[b - 1] ?? '')) b--;
  if (b > a) out.push({ start: offset + a, end: offset + b });
}

/** Cuts one over-long run of characters into pieces of at most `size` tokens. */
function hardSplit(text: string, start: number, end: number, size: number, count: TokenCounter): Piece[] {
  const out: Piece[] = [];
  let at = start;
  while (at < end) {
    let length = Math.max(1, Math.min(end - at, size * 4));
    let tokens = count(text.slice(at, at + length));
    while (tokens > size && length > 1) {
      length = Math.max(1, Math.floor(((length * size) / tokens) * 0.9));
      tokens = count(text.slice(at, at + length));
    }
    // Never cut a surrogate pair in two.
    const code = text.charCodeAt(at + length - 1);
    if (length > 1 && at + length < end && code >= 0xd800 && code <= 0xdbff) {
      length--;
      tokens = count(text.slice(at, at + length));
    }
    out.push({ start: at, end: at + length, tokens });
    at += length;
  }
  return out;
}

function piecesOf(
  text: string,
  start: number,
  end: number,
  level: number,
  size: number,
  count: TokenCounter,
  out: Piece[],
): void {
  for (const span of spans(text, start, end, SEPARATORS[level] ?? /\s+/g)) {
    if (level < SENTENCE_LEVEL) {
      piecesOf(text, span.start, span.end, level + 1, size, count, out);
      continue;
    }
    const tokens = count(text.slice(span.start, span.end));
    if (tokens <= size) out.push({ ...span, tokens });
    else if (level + 1 < SEPARATORS.length) piecesOf(text, span.start, span.end, level + 1, size, count, out);
    else out.push(...hardSplit(text, span.start, span.end, size, count));
  }
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Splits `text` into chunks of at most `options.size` tokens (by `count`), consecutive chunks
 * sharing up to `options.overlap` tokens of whole sentences. Whitespace-only text gives no chunk.
 * Yields to the event loop as it goes, so a large document does not stall the server.
 *
 * @example
 * const chunks = await chunkText(longText, { size: 200, overlap: 40 });
 * chunks[1].text.startsWith(lastSentenceOf(chunks[0].text)); // true when that sentence fits the overlap
 */
export async function chunkText(
  text: string,
  options: ChunkOptions,
  count: TokenCounter = countTokens,
): Promise<TextChunk[]> {
  const { size } = options;
  const overlap = Math.min(options.overlap, Math.floor(size / 2));
  if (!Number.isInteger(size) || size < 1) throw new RangeError('chunk size must be a positive integer');
  const pieces: Piece[] = [];
  const paragraphs = spans(text, 0, text.length, SEPARATORS[0] ?? /\n\n/g);
  for (let i = 0; i < paragraphs.length; i++) {
    const p = paragraphs[i];
    if (p) piecesOf(text, p.start, p.end, 1, size, count, pieces);
    if (i % 500 === 499) await tick();
  }
  const chunks: TextChunk[] = [];
  const sliceOf = (group: readonly Piece[]) => text.slice(group[0]?.start ?? 0, group[group.length - 1]?.end ?? 0);
  const estimate = (group: readonly Piece[]) =>
    group.reduce((sum, p, i) => sum + p.tokens + (i > 0 ? JOIN_TOKENS : 0), 0);
  /** Emits the longest head of `group` whose exact count fits (at least one piece); returns how many pieces it took. */
  const emit = async (group: readonly Piece[]): Promise<number> => {
    let n = group.length;
    let slice = sliceOf(group);
    let tokens = count(slice);
    while (tokens > size && n > 1) {
      n--;
      slice = sliceOf(group.slice(0, n));
      tokens = count(slice);
    }
    chunks.push({ text: slice, tokens, start: group[0]?.start ?? 0, end: group[n - 1]?.end ?? 0 });
    if (chunks.length % 200 === 0) await tick();
    return n;
  };
  /** The last pieces of an emitted chunk (never all of them) that open the next one, within the overlap. */
  const carry = (emitted: readonly Piece[]): Piece[] => {
    const carried: Piece[] = [];
    let tokens = 0;
    for (let i = emitted.length - 1; i >= 1; i--) {
      const p = emitted[i];
      if (!p || tokens + p.tokens + JOIN_TOKENS > overlap) break;
      carried.unshift(p);
      tokens += p.tokens + JOIN_TOKENS;
    }
    return carried;
  };
  // `group` is always a run of consecutive pieces ending just before `pieces[i]`.
  let group: Piece[] = [];
  let i = 0;
  while (i < pieces.length || group.length > 0) {
    const piece = pieces[i];
    if (piece && (group.length === 0 || estimate(group) + JOIN_TOKENS + piece.tokens <= size)) {
      group.push(piece);
      i++;
      continue;
    }
    const taken = await emit(group);
    const emitted = group.slice(0, taken);
    // Pieces that did not fit after all go back to the queue.
    i -= group.length - taken;
    group = i < pieces.length ? carry(emitted) : [];
    const next = pieces[i];
    while (next && group.length > 0 && estimate(group) + JOIN_TOKENS + next.tokens > size) group.shift();
  }
  return chunks;
}
