import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import { MERKLE_EMPTY_ROOT, inclusionProof, leafHash, merkleRoot, verifyInclusion } from './merkle.js';
import { flipByte } from './test-keys.js';

// An independent, deliberately naive RFC 6962 MTH over Buffers, to cross-check merkleRoot.
function referenceRoot(leaves: Buffer[]): Buffer {
  if (leaves.length === 0) return createHash('sha256').digest();
  if (leaves.length === 1) return leaves[0] ?? Buffer.alloc(0);
  let k = 1;
  while (k << 1 < leaves.length) k <<= 1;
  const left = referenceRoot(leaves.slice(0, k));
  const right = referenceRoot(leaves.slice(k));
  return createHash('sha256')
    .update(Buffer.concat([Buffer.from([1]), left, right]))
    .digest();
}

const hashArb = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString('hex'));
const leavesArb = fc.array(hashArb, { minLength: 1, maxLength: 70 });

describe('merkleRoot', () => {
  it('matches the RFC 6962 reference vectors of Certificate Transparency', () => {
    const inputs = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f'];
    const leaves = inputs.map((hex) => leafHash(Buffer.from(hex, 'hex')));
    const roots = [
      '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
      'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
      'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
      '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
      '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
      'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
      '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
    ];
    roots.forEach((root, i) => {
      expect(merkleRoot(leaves.slice(0, i + 1))).toBe(root);
    });
  });

  it('is SHA-256("") for no leaves and the leaf itself for one', () => {
    expect(merkleRoot([])).toBe(MERKLE_EMPTY_ROOT);
    expect(MERKLE_EMPTY_ROOT).toBe(createHash('sha256').digest('hex'));
    const leaf = leafHash('x');
    expect(merkleRoot([leaf])).toBe(leaf);
  });

  it('agrees with the naive reference for any leaves', () => {
    fc.assert(
      fc.property(leavesArb, (leaves) => {
        const expected = referenceRoot(leaves.map((l) => Buffer.from(l, 'hex'))).toString('hex');
        expect(merkleRoot(leaves)).toBe(expected);
      }),
    );
  });

  it('changes when any leaf changes', () => {
    fc.assert(
      fc.property(leavesArb, fc.nat(), fc.integer({ min: 1, max: 255 }), (leaves, i, mask) => {
        const changed = [...leaves];
        const at = i % leaves.length;
        changed[at] = flipByte(leaves[at] ?? '', i, mask);
        expect(merkleRoot(changed)).not.toBe(merkleRoot(leaves));
      }),
    );
  });

  it('rejects malformed leaves with their index in the path', () => {
    expect(() => merkleRoot([leafHash('a'), 'ABC'])).toThrow(ProtocolError);
    try {
      merkleRoot([leafHash('a'), leafHash('b').toUpperCase()]);
    } catch (err) {
      expect((err as ProtocolError).path).toBe('/leaves/1');
    }
  });
});

describe('inclusion proofs', () => {
  it('verify for every index of every tree', () => {
    fc.assert(
      fc.property(leavesArb, (leaves) => {
        const root = merkleRoot(leaves);
        leaves.forEach((leaf, i) => {
          const proof = inclusionProof(leaves, i);
          expect(verifyInclusion(leaf, i, leaves.length, proof, root)).toBe(true);
        });
      }),
      { numRuns: 50 },
    );
  });

  it('fail for a wrong leaf, index, root or a tampered, extended or shortened path', () => {
    fc.assert(
      fc.property(fc.uniqueArray(hashArb, { minLength: 2, maxLength: 40 }), fc.nat(), (leaves, seed) => {
        const n = leaves.length;
        const i = seed % n;
        const leaf = leaves[i] ?? '';
        const root = merkleRoot(leaves);
        const proof = inclusionProof(leaves, i);
        expect(verifyInclusion(flipByte(leaf, seed, 1), i, n, proof, root)).toBe(false);
        expect(verifyInclusion(leaf, (i + 1) % n, n, proof, root)).toBe(false);
        expect(verifyInclusion(leaf, i, n, proof, flipByte(root, seed, 1))).toBe(false);
        expect(verifyInclusion(leaf, i, n, [...proof, leaf], root)).toBe(false);
        expect(verifyInclusion(leaf, i, n, proof.slice(1), root)).toBe(false);
        const tampered = proof.map((p, j) => (j === seed % proof.length ? flipByte(p, seed, 1) : p));
        expect(verifyInclusion(leaf, i, n, tampered, root)).toBe(false);
      }),
    );
  });

  it('has an empty path for a single leaf and never throws on garbage', () => {
    const leaf = leafHash('only');
    expect(inclusionProof([leaf], 0)).toEqual([]);
    expect(verifyInclusion(leaf, 0, 1, [], leaf)).toBe(true);
    expect(verifyInclusion(leaf, 1, 1, [], leaf)).toBe(false);
    expect(verifyInclusion(leaf, -1, 1, [], leaf)).toBe(false);
    expect(verifyInclusion(leaf, 0, 0, [], leaf)).toBe(false);
    expect(verifyInclusion(leaf.toUpperCase(), 0, 1, [], leaf)).toBe(false);
    expect(verifyInclusion(leaf, 0, 2, ['zz'], leaf)).toBe(false);
    expect(verifyInclusion(leaf, 0, 1, null as unknown as string[], leaf)).toBe(false);
  });

  it('rejects an index outside the tree', () => {
    expect(() => inclusionProof([leafHash('a')], 1)).toThrow(ProtocolError);
    expect(() => inclusionProof([leafHash('a')], 0.5)).toThrow(ProtocolError);
  });
});

describe('leafHash', () => {
  // The one-shot hash of a prefixed string must be the hash of 0x00 then the string's UTF-8.
  const reference = (data: Uint8Array | string) =>
    createHash('sha256')
      .update(Buffer.from([0]))
      .update(data)
      .digest('hex');

  it('is SHA-256(0x00 || UTF-8) of any string, and of any bytes', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => {
        expect(leafHash(text)).toBe(reference(text));
      }),
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 100 }), (bytes) => {
        expect(leafHash(bytes)).toBe(reference(bytes));
      }),
    );
    expect(leafHash('\u0000é😀')).toBe(reference('\u0000é😀'));
  });
});
