import { deflateSync } from 'node:zlib';

/**
 * The deterministic "models" of the OpenAI test server: an echo chat model, hashed bag-of-words
 * embeddings, PNG images and WAV durations. Pure functions, so tests can predict every answer.
 */

/** The server's token count: whitespace-separated words. */
export function countWords(text: string): number {
  return text.split(/\s+/).filter((w) => w !== '').length;
}

/**
 * The echo model's answer to a conversation: `You said: <last user message>`, cut to
 * `maxTokens` words (finish_reason `length`) when that is shorter.
 *
 * @example
 * echoReply('hello there', 3); // { words: ['You', 'said:', 'hello'], finishReason: 'length' }
 */
export function echoReply(lastUser: string, maxTokens?: number): { words: string[]; finishReason: 'stop' | 'length' } {
  const words = `You said: ${lastUser}`.split(/\s+/).filter((w) => w !== '');
  if (maxTokens !== undefined && maxTokens < words.length) {
    return { words: words.slice(0, Math.max(0, maxTokens)), finishReason: 'length' };
  }
  return { words, finishReason: 'stop' };
}

function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/**
 * A hashed bag of words: each lowercase word adds ±1 to bucket `hash % dims` (the sign from
 * another hash bit, so collisions cancel rather than pile up), then the vector is L2-normalised.
 * Texts sharing words are close in cosine; an empty text maps to the first basis vector.
 *
 * @example
 * cosine(hashedEmbedding('the cat sat', 384), hashedEmbedding('a cat sat', 384)) > 0.5; // true
 */
export function hashedEmbedding(text: string, dims: number): number[] {
  const vector = new Array<number>(dims).fill(0);
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    const hash = fnv1a(word);
    vector[hash % dims] = (vector[hash % dims] ?? 0) + (hash & 0x80000000 ? -1 : 1);
  }
  const norm = Math.sqrt(vector.reduce((sum, x) => sum + x * x, 0));
  if (norm === 0) {
    vector[0] = 1;
    return vector;
  }
  return vector.map((x) => x / norm);
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

/** CRC-32 (ISO-HDLC), as PNG chunks use it. */
export function crc32(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of bytes) crc = (CRC_TABLE[(crc ^ byte) & 0xff] ?? 0) ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function pngChunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const typed = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(typed));
  return Buffer.concat([length, typed, crc]);
}

export const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/**
 * A valid RGB PNG (IHDR, one zlib IDAT, IEND, correct CRCs): a gradient whose colours come from
 * `seed`, so different prompts give different images.
 */
export function createPng(width: number, height: number, seed: string): Buffer {
  const hash = fnv1a(seed);
  const base = [hash & 0xff, (hash >>> 8) & 0xff, (hash >>> 16) & 0xff];
  const rows: Buffer[] = [];
  for (let y = 0; y < height; y++) {
    const row = Buffer.alloc(1 + width * 3); // filter byte 0 (None), then RGB triples
    for (let x = 0; x < width; x++) {
      row[1 + x * 3] = ((base[0] ?? 0) + x * 4) & 0xff;
      row[2 + x * 3] = ((base[1] ?? 0) + y * 4) & 0xff;
      row[3 + x * 3] = ((base[2] ?? 0) + (x + y) * 2) & 0xff;
    }
    rows.push(row);
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // colour type RGB
  // compression, filter and interlace methods stay 0
  return Buffer.concat([
    PNG_SIGNATURE,
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', deflateSync(Buffer.concat(rows))),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

/** `WxH` with each side capped to `cap` pixels (the test server never draws large images). */
export function parseImageSize(size: unknown, cap = 64): { width: number; height: number } | undefined {
  const text = typeof size === 'string' ? size : '1024x1024';
  const match = /^(\d{1,5})x(\d{1,5})$/.exec(text);
  if (!match) return undefined;
  const width = Number(match[1]);
  const height = Number(match[2]);
  if (width < 1 || height < 1) return undefined;
  return { width: Math.min(width, cap), height: Math.min(height, cap) };
}

/**
 * A 16-bit PCM mono WAV of a sine wave, for transcription tests.
 *
 * @example
 * createSineWav({ seconds: 2.5 }).length; // 44 + 2.5 * 16000 * 2 = 80044
 */
export function createSineWav(options: { seconds: number; sampleRate?: number; frequency?: number }): Buffer {
  const sampleRate = options.sampleRate ?? 16_000;
  const frequency = options.frequency ?? 440;
  const samples = Math.round(options.seconds * sampleRate);
  const wav = Buffer.alloc(44 + samples * 2);
  wav.write('RIFF', 0, 'latin1');
  wav.writeUInt32LE(36 + samples * 2, 4);
  wav.write('WAVE', 8, 'latin1');
  wav.write('fmt ', 12, 'latin1');
  wav.writeUInt32LE(16, 16); // fmt chunk size
  wav.writeUInt16LE(1, 20); // PCM
  wav.writeUInt16LE(1, 22); // mono
  wav.writeUInt32LE(sampleRate, 24);
  wav.writeUInt32LE(sampleRate * 2, 28); // byte rate
  wav.writeUInt16LE(2, 32); // block align
  wav.writeUInt16LE(16, 34); // bits per sample
  wav.write('data', 36, 'latin1');
  wav.writeUInt32LE(samples * 2, 40);
  for (let i = 0; i < samples; i++) {
    wav.writeInt16LE(Math.round(Math.sin((2 * Math.PI * frequency * i) / sampleRate) * 0.5 * 32767), 44 + i * 2);
  }
  return wav;
}

type JsonSchema = { type?: unknown; properties?: unknown; items?: unknown; enum?: unknown; required?: unknown };

/**
 * A value of a JSON schema, derived from `text` (deterministic): strings are the text, numbers its
 * word count, booleans true, enums their first value, objects every property, arrays one item.
 * Covers the schemas clients make from zod (`type`, `properties`, `items`, `enum`, `anyOf`).
 *
 * @example
 * valueOfSchema({ type: 'object', properties: { city: { type: 'string' } } }, 'Paris'); // { city: 'Paris' }
 */
export function valueOfSchema(schema: unknown, text: string): unknown {
  const s = (typeof schema === 'object' && schema !== null ? schema : {}) as JsonSchema & { anyOf?: unknown };
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  if (Array.isArray(s.anyOf) && s.anyOf.length > 0) return valueOfSchema(s.anyOf[0], text);
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
  switch (type) {
    case 'string':
      return text;
    case 'number':
    case 'integer':
      return countWords(text);
    case 'boolean':
      return true;
    case 'null':
      return null;
    case 'array':
      return [valueOfSchema(s.items, text)];
    default: {
      const properties = (typeof s.properties === 'object' && s.properties !== null ? s.properties : {}) as Record<
        string,
        unknown
      >;
      return Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, valueOfSchema(v, text)]));
    }
  }
}

/** One tool of a chat request, as the test server reads it. */
export interface TestTool {
  name: string;
  parameters: unknown;
}

/**
 * The test model's deterministic answer to a chat request with tools or a response format:
 * with tools (and `tool_choice` not `none`) and a user message last, a call of the named tool or
 * else the first, its arguments the parameters' schema filled from that message; after tool
 * results, text quoting them; `json_schema`: an object of the schema; `json_object`:
 * `{"echo": <last user message>}`. Undefined when the plain echo model answers.
 *
 * @example
 * surfaceReply({ tools: [{ name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }], last: { role: 'user', content: 'Paris' }, lastUser: 'Paris' });
 * // { toolCall: { name: 'weather', arguments: '{"city":"Paris"}' } }
 */
export function surfaceReply(ask: {
  tools: TestTool[];
  toolChoice?: unknown;
  responseFormat?: unknown;
  last: { role: string; content: string };
  toolResults: string[];
  lastUser: string;
}): { toolCall: { name: string; arguments: string } } | { content: string } | undefined {
  const named = (ask.toolChoice as { function?: { name?: unknown } } | undefined)?.function?.name;
  if (ask.tools.length > 0 && ask.toolChoice !== 'none' && ask.last.role === 'user') {
    const tool = ask.tools.find((t) => t.name === named) ?? ask.tools[0];
    if (tool)
      return { toolCall: { name: tool.name, arguments: JSON.stringify(valueOfSchema(tool.parameters, ask.lastUser)) } };
  }
  const format = ask.responseFormat as { type?: unknown; json_schema?: { schema?: unknown } } | undefined;
  if (format?.type === 'json_schema')
    return { content: JSON.stringify(valueOfSchema(format.json_schema?.schema, ask.lastUser)) };
  if (format?.type === 'json_object') return { content: JSON.stringify({ echo: ask.lastUser }) };
  if (ask.toolResults.length > 0) return { content: `The tool said: ${ask.toolResults.join(' | ')}` };
  return undefined;
}
