import { readTlv } from './der.js';

/**
 * TESTS ONLY: which bytes of an attestation structure a tamper test flips, one at a time. A flip
 * costs a whole verification (1 to 6 ms: a changed certificate or CRL is parsed and checked again),
 * so flipping every byte of the TDX and SEV-SNP vectors cost about a minute of CPU per run. A test
 * lists the structure's fields as spans instead and flips the first and last byte of each, every
 * byte of a span marked `every`, and a seeded sample over the whole structure. A signature covers
 * one contiguous region and a parser reads whole fields, so a field the verifier failed to sign or
 * check shows at its edges; the sample looks inside the fields and at what a list left out.
 * SVC_TEST_FLIPS=all flips every byte instead; SVC_TEST_FLIP_SEED draws another sample.
 */
export interface Span {
  name: string;
  /** The span's first byte. */
  start: number;
  /** Just past its last byte. */
  end: number;
  /** Flip every byte of the span, not only its edges. */
  every?: boolean;
}

/** One byte to flip and the innermost span it lies in (for the failure message). */
export interface Flip {
  at: number;
  span: string;
}

const SEED = Number(process.env.SVC_TEST_FLIP_SEED ?? 1);
const EVERY_BYTE = process.env.SVC_TEST_FLIPS === 'all';
/** A test's timeout: a few seconds of flips, or minutes with SVC_TEST_FLIPS=all. */
export const FLIPS_TIMEOUT_MS = EVERY_BYTE ? 600_000 : 60_000;

/**
 * The bytes of a `length`-byte structure to flip: each span's edges (or all its bytes), and `sample`
 * more drawn from the whole structure by a generator seeded with SVC_TEST_FLIP_SEED and the
 * structure's `name`, so a failure reproduces. In order, each once.
 *
 * @example
 * for (const { at, span } of flips('report', 1184, [{ name: 'measurement', start: 0x90, end: 0xc0 }], 32))
 *   expect(failed(await verify(flip(report, at)))).toContain('report-signature'); // `span` in the message
 */
export function flips(name: string, length: number, spans: readonly Span[], sample: number): Flip[] {
  const picked = new Set<number>();
  if (EVERY_BYTE) for (let at = 0; at < length; at++) picked.add(at);
  for (const s of spans) {
    if (s.start < 0 || s.end > length || s.start >= s.end) throw new Error(`span ${s.name} is not inside ${name}`);
    if (s.every) for (let at = s.start; at < s.end; at++) picked.add(at);
    picked.add(s.start).add(s.end - 1);
  }
  const random = generator(SEED, name);
  for (let i = 0; i < sample; i++) picked.add(Math.floor(random() * length));
  const innermost = (at: number) =>
    spans
      .filter((s) => s.start <= at && at < s.end)
      .reduce<Span | undefined>((best, s) => (!best || s.end - s.start < best.end - best.start ? s : best), undefined)
      ?.name ?? name;
  return [...picked].sort((a, b) => a - b).map((at) => ({ at, span: innermost(at) }));
}

/**
 * Verifies the structure with each byte of `positions` flipped in turn (`failedChecks` returns the
 * names of the checks that failed) and throws, naming the byte and its span, at the first edit that
 * fails none of the checks `want` expects for it.
 */
export async function expectEachFails(
  what: string,
  positions: readonly Flip[],
  failedChecks: (at: number) => Promise<string[]>,
  want: (at: number) => readonly string[],
): Promise<void> {
  for (const { at, span } of positions) {
    const names = await failedChecks(at);
    if (!names.some((n) => want(at).includes(n)))
      throw new Error(
        `${what} byte ${at} (0x${at.toString(16)}, ${span}): failed ${names.join(',') || 'nothing'}, expected one of ${want(at).join(',')}`,
      );
  }
}

/**
 * The spans of a DER certificate or CRL. Outside the signed part (the outer SEQUENCE's header, the
 * signature algorithm and the signature) only a strict parser stands between an edit and
 * acceptance, so every tag and length byte there is flipped, down to the INTEGERs of an ECDSA
 * signature, and the edges of every value. Inside it (`tbsCertificate`, `tbsCertList`) any edit
 * breaks the signature: each field's tag and length bytes and the edges of its value.
 */
export function derSpans(der: Uint8Array, name: string): Span[] {
  const spans: Span[] = [];
  const walk = (from: number, to: number, path: string) => {
    for (let off = from, i = 0; off < to; i++) {
      const t = readTlv(der, off);
      const valueStart = t.end - t.value.length;
      const at = `${path}/${i}`;
      const signedField = path === '/0/0';
      spans.push({ name: `${name} ${at} tag and length`, start: off, end: valueStart, every: true });
      if (t.tag & 0x20 && !signedField) walk(valueStart, t.end, at);
      else if (t.tag === 0x03 && !signedField && t.value[0] === 0 && holdsOneElement(t.value.subarray(1))) {
        spans.push({ name: `${name} ${at} unused bits`, start: valueStart, end: valueStart + 1, every: true });
        walk(valueStart + 1, t.end, at);
      } else if (t.value.length > 0) spans.push({ name: `${name} ${at} value`, start: valueStart, end: t.end });
      off = t.end;
    }
  };
  walk(0, der.length, '');
  return spans;
}

/** Whether `bytes` are exactly one DER SEQUENCE (an ECDSA signature inside its BIT STRING). */
function holdsOneElement(bytes: Uint8Array): boolean {
  try {
    const t = readTlv(bytes);
    return t.tag === 0x30 && t.end === bytes.length;
  } catch {
    return false;
  }
}

/** mulberry32, seeded with `seed` and a hash of `name` so that each structure gets its own sample. */
function generator(seed: number, name: string): () => number {
  let state = seed >>> 0;
  for (const c of name) state = (Math.imul(state ^ c.charCodeAt(0), 0x01000193) >>> 0) + 0x9e3779b9;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
