/**
 * A minimal DER reader for the vendor extensions @peculiar/x509 leaves opaque (AMD's VCEK TCB
 * values, Intel's SGX extension tree). Strict: definite lengths only, and a child never runs past
 * its parent.
 */
export interface Tlv {
  tag: number;
  /** The value bytes (without tag and length). */
  value: Uint8Array;
  /** Offset just past this element in the buffer it was read from. */
  end: number;
}

export function readTlv(buf: Uint8Array, offset = 0): Tlv {
  if (offset + 2 > buf.length) throw new Error('DER: truncated element');
  const tag = buf[offset] as number;
  let len = buf[offset + 1] as number;
  let start = offset + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4 || start + n > buf.length) throw new Error('DER: bad length');
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + (buf[start + i] as number);
    start += n;
  }
  if (start + len > buf.length) throw new Error('DER: element runs past its parent');
  return { tag, value: buf.subarray(start, start + len), end: start + len };
}

/** The elements of a constructed value (SEQUENCE, SET). */
export function children(value: Uint8Array): Tlv[] {
  const out: Tlv[] = [];
  for (let off = 0; off < value.length;) {
    const t = readTlv(value, off);
    out.push(t);
    off = t.end;
  }
  return out;
}

export function decodeOid(value: Uint8Array): string {
  const parts: number[] = [];
  let acc = 0;
  for (const b of value) {
    acc = acc * 128 + (b & 0x7f);
    if ((b & 0x80) === 0) {
      if (parts.length === 0) parts.push(acc < 80 ? Math.floor(acc / 40) : 2, acc < 80 ? acc % 40 : acc - 80);
      else parts.push(acc);
      acc = 0;
    }
  }
  return parts.join('.');
}

/** A non-negative DER INTEGER that fits a JavaScript number. */
export function decodeUint(tlv: Tlv): number {
  if (tlv.tag !== 0x02 || tlv.value.length === 0 || tlv.value.length > 6)
    throw new Error('DER: expected a small INTEGER');
  if ((tlv.value[0] as number) & 0x80) throw new Error('DER: negative INTEGER');
  let n = 0;
  for (const b of tlv.value) n = n * 256 + b;
  return n;
}

/** Throws unless every constructed element's children fill it exactly, all the way down. */
export function assertWellFormed(value: Uint8Array): void {
  for (const child of children(value)) if (child.tag & 0x20) assertWellFormed(child.value);
}
