import { describe, expect, it } from 'vitest';
import { generateEd25519, publicKeyHex } from './keys.js';
import { checkpointText, noteVerifierKey, signNote } from './log-note.js';
import {
  logRecordHash,
  logTilePath,
  parseLogTilePath,
  recordProof,
  recordProofIndexes,
  storedHashCount,
  storedHashes,
  storedHashesIndexes,
  storedHashIndex,
  tileExists,
  tileHashes,
  tileIndexes,
  treeHash,
  treeHashIndexes,
  treeProof,
  treeProofIndexes,
} from './log-tree.js';
import { inclusionProof, merkleRoot } from './merkle.js';
import {
  checkConsistency,
  checkInclusion,
  openNote,
  parseCheckpoint,
  parseNoteVerifierKey,
  type NoteVerifierKey,
} from './verify/log.js';

/** A log in memory, appended the way the server appends: stored hashes only. */
function buildLog(count: number) {
  const stored: Buffer[] = [];
  const leaves: Buffer[] = [];
  const read = (indexes: number[]) =>
    indexes.map((i) => {
      const h = stored[i];
      if (!h) throw new Error(`no stored hash ${i}`);
      return h;
    });
  for (let n = 0; n < count; n++) {
    const leaf = logRecordHash(Buffer.from(`record ${n}`));
    leaves.push(leaf);
    expect(stored.length).toBe(storedHashIndex(0, n));
    stored.push(...storedHashes(n, leaf, read(storedHashesIndexes(n))));
    expect(stored.length).toBe(storedHashCount(n + 1));
  }
  return { stored, leaves, read };
}

const b64 = (h: Buffer) => h.toString('base64');
const hex = (hs: readonly Buffer[]) => hs.map((h) => h.toString('hex'));

describe('the log tree, laid out as sumdb/tlog', () => {
  const log = buildLog(70);

  it('stored hash indexes follow tlog (leaf n, then what it completes)', () => {
    expect([0, 1, 2, 3, 4].map((n) => storedHashIndex(0, n))).toEqual([0, 1, 3, 4, 7]);
    expect(storedHashIndex(1, 0)).toBe(2);
    expect(storedHashIndex(2, 0)).toBe(6);
    expect(storedHashCount(0)).toBe(0);
    expect(storedHashCount(4)).toBe(7);
  });

  it('every tree hash equals the RFC 6962 root of its leaves', () => {
    for (let size = 1; size <= 70; size++)
      expect(treeHash(size, log.read(treeHashIndexes(size))).toString('hex')).toBe(
        merkleRoot(hex(log.leaves.slice(0, size))),
      );
  });

  it('inclusion proofs equal RFC 6962 audit paths and check; a changed hash does not', async () => {
    for (const size of [1, 2, 3, 7, 8, 9, 64, 70])
      for (let n = 0; n < size; n++) {
        const proof = recordProof(size, n, log.read(recordProofIndexes(size, n)));
        expect(hex(proof)).toEqual(inclusionProof(hex(log.leaves.slice(0, size)), n));
        const root = b64(treeHash(size, log.read(treeHashIndexes(size))));
        const leaf = (log.leaves[n] as Buffer).toString('hex');
        expect(await checkInclusion(proof.map(b64), size, root, n, leaf)).toBe(true);
        if (proof.length > 0) {
          const bad = proof.map(b64);
          bad[0] = b64(Buffer.alloc(32, 7));
          expect(await checkInclusion(bad, size, root, n, leaf)).toBe(false);
        }
        expect(await checkInclusion(proof.map(b64), size, root, n, '00'.repeat(32))).toBe(false);
      }
  });

  it('consistency proofs check between every pair of sizes; a forked root does not', async () => {
    const root = (size: number) => b64(treeHash(size, log.read(treeHashIndexes(size))));
    for (let to = 1; to <= 40; to++)
      for (let from = 1; from <= to; from++) {
        const proof = treeProof(to, from, log.read(treeProofIndexes(to, from))).map(b64);
        expect(await checkConsistency(proof, to, root(to), from, root(from))).toBe(true);
        expect(await checkConsistency(proof, to, root(to), from, b64(Buffer.alloc(32, 1)))).toBe(false);
      }
  });

  it('tiles: paths as tlog writes them, contents the level hashes, existence by size', () => {
    expect(logTilePath({ h: 8, l: 0, n: 1234067, w: 256 })).toBe('tile/8/0/x001/x234/067');
    expect(logTilePath({ h: 8, l: 1, n: 0, w: 5 })).toBe('tile/8/1/000.p/5');
    expect(parseLogTilePath('tile/8/0/x001/x234/067')).toEqual({ h: 8, l: 0, n: 1234067, w: 256 });
    expect(parseLogTilePath('tile/8/0/001.p/5')).toEqual({ h: 8, l: 0, n: 1, w: 5 });
    for (const bad of ['tile/8/0/1', 'tile/8/0/001.p/256', 'tile/8/data/000', 'tile/8/0/x000/001', 'tile/8/0/001.p/0'])
      expect(parseLogTilePath(bad)).toBeUndefined();
    const tile = { h: 8, l: 0, n: 0, w: 70 };
    expect(tileHashes(Buffer.concat(log.read(tileIndexes(tile))))).toEqual(log.leaves);
    expect(tileExists(tile, 70)).toBe(true);
    expect(tileExists({ ...tile, w: 71 }, 70)).toBe(false);
    expect(tileExists({ h: 8, l: 1, n: 0, w: 1 }, 255)).toBe(false);
    expect(tileExists({ h: 8, l: 1, n: 0, w: 1 }, 256)).toBe(true);
  });
});

describe('checkpoints as signed notes', () => {
  const key = generateEd25519();
  const origin = 'svc.example/log';

  it('signs and opens; another key, a changed text or an unknown key fail', async () => {
    const vkey = noteVerifierKey(origin, publicKeyHex(key.publicKey));
    const parsed = (await parseNoteVerifierKey(vkey)) as NoteVerifierKey;
    expect(parsed.public_key_hex).toBe(publicKeyHex(key.publicKey));
    const note = signNote(checkpointText(origin, 3, Buffer.alloc(32, 9)), origin, key.privateKey);
    expect(note).toMatch(/^svc\.example\/log\n3\n[A-Za-z0-9+/=]{44}\n\n— svc\.example\/log [A-Za-z0-9+/=]+\n$/);
    const opened = await openNote(note, [parsed]);
    expect(opened).toMatchObject({ text: `${origin}\n3\n${Buffer.alloc(32, 9).toString('base64')}\n` });
    expect(parseCheckpoint((opened as { text: string }).text)).toEqual({
      origin,
      tree_size: 3,
      root_hash_b64: Buffer.alloc(32, 9).toString('base64'),
    });
    expect(await openNote(note.replace('\n3\n', '\n4\n'), [parsed])).toHaveProperty('problem');
    const other = (await parseNoteVerifierKey(
      noteVerifierKey(origin, publicKeyHex(generateEd25519().publicKey)),
    )) as NoteVerifierKey;
    expect(await openNote(note, [other])).toEqual({ problem: 'no signature by a known key' });
    expect(await parseNoteVerifierKey(vkey.replace(/\+[0-9a-f]{8}\+/, '+00000000+'))).toHaveProperty('problem');
  });

  it("parses a verifier key whose base64 holds a '+' (split at the first two, as note.NewVerifier)", async () => {
    // Public key 1d12...: base64(0x01 || key) is AR0Sj0KS+GxJ..., with a '+' inside.
    const publicHex = '1d128f4292f86c49cacafbf7539bb8f64b2952657cc8c0b6af4264d75ebcc307';
    const vkey = noteVerifierKey(origin, publicHex);
    expect(vkey.split('+').length).toBeGreaterThan(3);
    expect(await parseNoteVerifierKey(vkey)).toEqual({
      name: origin,
      key_hash_hex: vkey.split('+')[1],
      public_key_hex: publicHex,
    });
    expect(await parseNoteVerifierKey(`${origin}+${vkey.split('+')[1]}`)).toHaveProperty('problem');
  });
});
