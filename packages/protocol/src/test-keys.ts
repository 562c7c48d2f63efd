import { privateKeyFromSeedHex, publicKeyHex } from './keys.js';

// Fixed keys shared by the tests (not exported from index.ts): the seeds of docs/receipts.md
// and docs/evidence.md.
const seed = (first: number): string => Buffer.from(Array.from({ length: 32 }, (_, i) => first + i)).toString('hex');

export const NODE_SEED_HEX = seed(0x00);
export const PLATFORM_SEED_HEX = seed(0x20);
export const nodeKey = privateKeyFromSeedHex(NODE_SEED_HEX);
export const platformKey = privateKeyFromSeedHex(PLATFORM_SEED_HEX);
export const NODE_PUBLIC_KEY_HEX = publicKeyHex(nodeKey);
export const PLATFORM_PUBLIC_KEY_HEX = publicKeyHex(platformKey);

/** `hex` with the byte at `index` XOR-ed with `mask` (1..255). */
export function flipByte(hex: string, index: number, mask: number): string {
  const bytes = Buffer.from(hex, 'hex');
  bytes[index % bytes.length] = (bytes[index % bytes.length] ?? 0) ^ mask;
  return bytes.toString('hex');
}
