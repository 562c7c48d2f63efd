import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type GgufTensor, type GgufValue, writeGguf } from './gguf-writer.js';

/**
 * Tiny llama-architecture GGUF models with random F32 weights, for tests and smoke runs of the
 * llama-cpp engine without downloading a model. The vocabulary is byte-level SentencePiece
 * (`tokenizer.ggml.model = "llama"`): `<unk>`, `<s>`, `</s>`, the 256 tokens `<0x00>`..`<0xFF>` and
 * the space mark `▁`, so any text tokenises (one token per UTF-8 byte, spaces as `▁`). Output quality is noise by design.
 */
export interface TinyGgufOptions {
  path: string;
  kind: 'chat' | 'embedding';
  /** Embedding width: default 64 for chat, 384 for embedding (all-MiniLM-L6-v2's width). */
  dims?: number;
  /** Transformer blocks; default 2. */
  layers?: number;
  /** Context length; default 256. */
  contextLength?: number;
  /** PRNG seed for the weights; default 1. */
  seed?: number;
}

export interface TinyGgufInfo {
  path: string;
  kind: 'chat' | 'embedding';
  dims: number;
  layers: number;
  contextLength: number;
  vocabSize: number;
}

const SPECIAL = ['<unk>', '<s>', '</s>'] as const;
const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, byte: 6 } as const;
/** SentencePiece's word-boundary mark; spaces become it, and it decodes back to a space. */
const SPACE_MARK = '\u2581';
const HEAD_DIM = 16;

function byteVocab(): { tokens: string[]; scores: number[]; types: number[] } {
  const tokens: string[] = [...SPECIAL];
  const types: number[] = [TOKEN_TYPE.unknown, TOKEN_TYPE.control, TOKEN_TYPE.control];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    types.push(TOKEN_TYPE.byte);
  }
  tokens.push(SPACE_MARK);
  types.push(TOKEN_TYPE.normal);
  return { tokens, scores: tokens.map(() => 0), types };
}

/** mulberry32: small, seedable, good enough for random weights. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Writes a tiny llama GGUF (v3) to `options.path` and describes it. A chat model's output
 * matrix is zero for the special tokens and non-printable bytes, so generation yields printable
 * ASCII and never ends early; an embedding model declares mean pooling.
 *
 * @example
 * const info = await createTinyGguf({ path: '/tmp/tiny-embed.gguf', kind: 'embedding' });
 * info.dims; // 384
 */
export async function createTinyGguf(options: TinyGgufOptions): Promise<TinyGgufInfo> {
  const dims = options.dims ?? (options.kind === 'embedding' ? 384 : 64);
  const layers = options.layers ?? 2;
  const contextLength = options.contextLength ?? 256;
  if (dims % HEAD_DIM !== 0) throw new Error(`dims must be a multiple of ${HEAD_DIM}, got ${dims}`);
  const heads = dims / HEAD_DIM;
  const ff = dims * 2;
  const vocab = byteVocab();
  const nVocab = vocab.tokens.length;
  const random = prng(options.seed ?? 1);

  const filled = (n: number, value: number): Float32Array => new Float32Array(n).fill(value);
  const randomMatrix = (rows: number, cols: number, scale: number): Float32Array => {
    const data = new Float32Array(rows * cols);
    for (let i = 0; i < data.length; i++) data[i] = (random() * 2 - 1) * scale;
    return data;
  };
  const linear = (input: number, output: number): Float32Array => randomMatrix(input, output, 1 / Math.sqrt(input));

  const output = randomMatrix(nVocab, dims, 1);
  for (let token = 0; token < nVocab; token++) {
    const byte = token - SPECIAL.length;
    if (byte < 0x20 || (byte > 0x7e && byte < 256)) output.fill(0, token * dims, (token + 1) * dims);
  }

  const tensors: GgufTensor[] = [
    { name: 'token_embd.weight', dims: [dims, nVocab], data: randomMatrix(nVocab, dims, 1) },
    { name: 'output_norm.weight', dims: [dims], data: filled(dims, 1) },
    { name: 'output.weight', dims: [dims, nVocab], data: output },
  ];
  for (let i = 0; i < layers; i++) {
    const blk = `blk.${i}`;
    tensors.push(
      { name: `${blk}.attn_norm.weight`, dims: [dims], data: filled(dims, 1) },
      { name: `${blk}.attn_q.weight`, dims: [dims, dims], data: linear(dims, dims) },
      { name: `${blk}.attn_k.weight`, dims: [dims, dims], data: linear(dims, dims) },
      { name: `${blk}.attn_v.weight`, dims: [dims, dims], data: linear(dims, dims) },
      { name: `${blk}.attn_output.weight`, dims: [dims, dims], data: linear(dims, dims) },
      { name: `${blk}.ffn_norm.weight`, dims: [dims], data: filled(dims, 1) },
      { name: `${blk}.ffn_gate.weight`, dims: [dims, ff], data: linear(dims, ff) },
      { name: `${blk}.ffn_up.weight`, dims: [dims, ff], data: linear(dims, ff) },
      { name: `${blk}.ffn_down.weight`, dims: [ff, dims], data: linear(ff, dims) },
    );
  }

  const u32 = (value: number): GgufValue => ({ type: 'u32', value });
  const metadata: [string, GgufValue][] = [
    ['general.architecture', { type: 'string', value: 'llama' }],
    ['general.name', { type: 'string', value: `svc-tiny-${options.kind}` }],
    ['general.file_type', u32(0)],
    ['llama.vocab_size', u32(nVocab)],
    ['llama.context_length', u32(contextLength)],
    ['llama.embedding_length', u32(dims)],
    ['llama.block_count', u32(layers)],
    ['llama.feed_forward_length', u32(ff)],
    ['llama.attention.head_count', u32(heads)],
    ['llama.attention.head_count_kv', u32(heads)],
    ['llama.rope.dimension_count', u32(HEAD_DIM)],
    ['llama.attention.layer_norm_rms_epsilon', { type: 'f32', value: 1e-5 }],
    ['tokenizer.ggml.model', { type: 'string', value: 'llama' }],
    ['tokenizer.ggml.tokens', { type: 'string[]', value: vocab.tokens }],
    ['tokenizer.ggml.scores', { type: 'f32[]', value: vocab.scores }],
    ['tokenizer.ggml.token_type', { type: 'i32[]', value: vocab.types }],
    ['tokenizer.ggml.unknown_token_id', u32(0)],
    ['tokenizer.ggml.bos_token_id', u32(1)],
    ['tokenizer.ggml.eos_token_id', u32(2)],
    ['tokenizer.ggml.add_bos_token', { type: 'bool', value: true }],
    ['tokenizer.ggml.add_eos_token', { type: 'bool', value: false }],
  ];
  if (options.kind === 'embedding') metadata.push(['llama.pooling_type', u32(1)]);

  await writeGguf(options.path, { metadata, tensors });
  return { path: options.path, kind: options.kind, dims, layers, contextLength, vocabSize: nVocab };
}

function parseArgs(argv: readonly string[]): TinyGgufOptions {
  const value = (flag: string): string | undefined => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const kind = value('--kind') ?? 'chat';
  const path = value('--out');
  if ((kind !== 'chat' && kind !== 'embedding') || path === undefined) {
    throw new Error('usage: tiny-gguf.ts --kind chat|embedding --out FILE.gguf [--dims N] [--layers N]');
  }
  const dims = value('--dims');
  const layers = value('--layers');
  return {
    path: resolve(path),
    kind,
    ...(dims === undefined ? {} : { dims: Number(dims) }),
    ...(layers === undefined ? {} : { layers: Number(layers) }),
  };
}

// Script entry: `npx tsx packages/node-agent/src/engines/tiny-gguf.ts --kind chat --out tiny.gguf`
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  Promise.resolve(process.argv.slice(2))
    .then((argv) => createTinyGguf(parseArgs(argv)))
    .then(
      (info) => process.stdout.write(`${JSON.stringify(info)}\n`),
      (error: unknown) => {
        process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
        process.exitCode = 1;
      },
    );
}
