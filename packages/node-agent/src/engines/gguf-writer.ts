import { writeFile } from 'node:fs/promises';

/**
 * A minimal GGUF v3 encoder: metadata key/values and F32 tensors, little-endian, the layout
 * llama.cpp reads (`ggml/src/gguf.cpp`): header, metadata, tensor infos, padding to the
 * alignment, then the tensor data, each tensor starting on an aligned offset.
 */
export type GgufValue =
  | { type: 'u32'; value: number }
  | { type: 'i32'; value: number }
  | { type: 'f32'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'string[]'; value: readonly string[] }
  | { type: 'f32[]'; value: readonly number[] }
  | { type: 'i32[]'; value: readonly number[] };

/** An F32 tensor; `dims` in ggml order (the fastest-varying dimension first). */
export interface GgufTensor {
  name: string;
  dims: readonly number[];
  data: Float32Array;
}

export interface GgufFile {
  metadata: ReadonlyArray<readonly [string, GgufValue]>;
  tensors: readonly GgufTensor[];
}

const MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
const VERSION = 3;
const ALIGNMENT = 32;
const GGML_TYPE_F32 = 0;

/** GGUF metadata value type codes. */
const T = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9 } as const;

class ByteSink {
  private chunks: Buffer[] = [];
  length = 0;

  push(bytes: Buffer): void {
    this.chunks.push(bytes);
    this.length += bytes.length;
  }

  u32(value: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(value);
    this.push(b);
  }

  i32(value: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(value);
    this.push(b);
  }

  u64(value: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(value));
    this.push(b);
  }

  f32(value: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(value);
    this.push(b);
  }

  string(value: string): void {
    const bytes = Buffer.from(value, 'utf8');
    this.u64(bytes.length);
    this.push(bytes);
  }

  padTo(alignment: number): void {
    const pad = (alignment - (this.length % alignment)) % alignment;
    if (pad > 0) this.push(Buffer.alloc(pad));
  }

  toBuffer(): Buffer {
    return Buffer.concat(this.chunks, this.length);
  }
}

function writeValue(sink: ByteSink, value: GgufValue): void {
  switch (value.type) {
    case 'u32':
      sink.u32(T.u32);
      sink.u32(value.value);
      return;
    case 'i32':
      sink.u32(T.i32);
      sink.i32(value.value);
      return;
    case 'f32':
      sink.u32(T.f32);
      sink.f32(value.value);
      return;
    case 'bool':
      sink.u32(T.bool);
      sink.push(Buffer.from([value.value ? 1 : 0]));
      return;
    case 'string':
      sink.u32(T.string);
      sink.string(value.value);
      return;
    case 'string[]':
      sink.u32(T.array);
      sink.u32(T.string);
      sink.u64(value.value.length);
      for (const item of value.value) sink.string(item);
      return;
    case 'f32[]':
      sink.u32(T.array);
      sink.u32(T.f32);
      sink.u64(value.value.length);
      for (const item of value.value) sink.f32(item);
      return;
    case 'i32[]':
      sink.u32(T.array);
      sink.u32(T.i32);
      sink.u64(value.value.length);
      for (const item of value.value) sink.i32(item);
      return;
  }
}

/**
 * The bytes of a GGUF v3 file.
 *
 * @example
 * encodeGguf({
 *   metadata: [['general.architecture', { type: 'string', value: 'llama' }]],
 *   tensors: [{ name: 'output_norm.weight', dims: [4], data: new Float32Array(4).fill(1) }],
 * }).subarray(0, 4).toString(); // 'GGUF'
 */
export function encodeGguf(file: GgufFile): Buffer {
  const sink = new ByteSink();
  sink.u32(MAGIC);
  sink.u32(VERSION);
  sink.u64(file.tensors.length);
  sink.u64(file.metadata.length);
  for (const [key, value] of file.metadata) {
    sink.string(key);
    writeValue(sink, value);
  }

  let offset = 0;
  const offsets: number[] = [];
  for (const tensor of file.tensors) {
    const elements = tensor.dims.reduce((n, d) => n * d, 1);
    if (elements !== tensor.data.length) {
      throw new Error(
        `tensor ${tensor.name}: dims ${tensor.dims.join('x')} need ${elements} values, got ${tensor.data.length}`,
      );
    }
    offsets.push(offset);
    offset += Math.ceil((elements * 4) / ALIGNMENT) * ALIGNMENT;
  }
  file.tensors.forEach((tensor, i) => {
    sink.string(tensor.name);
    sink.u32(tensor.dims.length);
    for (const dim of tensor.dims) sink.u64(dim);
    sink.u32(GGML_TYPE_F32);
    sink.u64(offsets[i] ?? 0);
  });

  sink.padTo(ALIGNMENT);
  for (const tensor of file.tensors) {
    const bytes = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
    // Float32Array is host-endian; every platform node-llama-cpp ships for is little-endian.
    sink.push(Buffer.from(bytes));
    sink.padTo(ALIGNMENT);
  }
  return sink.toBuffer();
}

/** Writes {@link encodeGguf}'s bytes to `path`. */
export async function writeGguf(path: string, file: GgufFile): Promise<void> {
  await writeFile(path, encodeGguf(file));
}
