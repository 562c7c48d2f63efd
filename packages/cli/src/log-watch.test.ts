import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  checkpointText,
  createMemoryLog,
  generateEd25519,
  logRecordHash,
  noteVerifierKey,
  parseLogTilePath,
  publicKeyHex,
  signNote,
  storedHashIndex,
  type MemoryLog,
} from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { log } from './log-watch.js';

const ORIGIN = 'svc.test/log';
const platform = generateEd25519();
const VKEY = noteVerifierKey(ORIGIN, publicKeyHex(platform.privateKey));

/**
 * A log server built from protocol's log tree and notes, as the server's read paths answer:
 * `size` is the tree its checkpoint signs; `note` replaces that checkpoint (a forged one);
 * `doctor` alters a tile's bytes on the way out (a leaf row altered behind the checkpoint).
 */
interface LogServer {
  log: MemoryLog;
  size: number;
  note?: string;
  doctor?: (path: string, bytes: Buffer) => Buffer;
  base: string;
  server: Server;
}

function grow(log: MemoryLog, count: number): void {
  for (let i = 0; i < count; i++) log.append(logRecordHash(Buffer.from(`run ${log.size()}`)));
}

const sign = (size: number, root: Buffer) => signNote(checkpointText(ORIGIN, size, root), ORIGIN, platform.privateKey);

async function startLogServer(): Promise<LogServer> {
  const s = { log: createMemoryLog(), size: 0 } as LogServer;
  s.server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const send = (status: number, body: string | Buffer) => res.writeHead(status).end(body);
    if (url.pathname === '/api/v1/keys/platform')
      return send(200, JSON.stringify({ keys: [], log: { origin: ORIGIN, verifier_keys: [VKEY] } }));
    if (url.pathname === '/api/v1/log/checkpoint') return send(200, s.note ?? sign(s.size, s.log.root(s.size)));
    if (url.pathname === '/api/v1/log/proof/consistency') {
      const [from, to] = [Number(url.searchParams.get('from')), Number(url.searchParams.get('to'))];
      const proof = s.log.consistencyProof(from, to).map((h) => h.toString('base64'));
      return send(200, JSON.stringify({ from, to, proof }));
    }
    const path = url.pathname.replace('/api/v1/log/', '');
    const tile = parseLogTilePath(path);
    const bytes = tile && s.log.tile(tile, s.size);
    if (!bytes) return send(404, '{"code":"not_found"}');
    return send(200, s.doctor ? s.doctor(path, Buffer.from(bytes)) : bytes);
  });
  await new Promise<void>((resolve) => s.server.listen(0, '127.0.0.1', resolve));
  s.base = `http://127.0.0.1:${(s.server.address() as AddressInfo).port}`;
  return s;
}

/** Runs `svc log watch --once` in process; returns its exit code and what it printed. */
async function watch(base: string, dir: string, ...extra: string[]) {
  let out = '';
  let err = '';
  const code = await log(['watch', '--state', dir, '--once', ...extra, base], {
    out: (t) => (out += t),
    err: (t) => (err += t),
  });
  return { code, out, err };
}

const stateOf = (dir: string) =>
  JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as { tree_size: number; checkpoint: string };
const freshDir = () => mkdtempSync(join(tmpdir(), 'svc-log-watch-'));

/** Flips one byte of leaf `index`'s hash in the level-0 tile that holds it. */
const alterLeaf = (index: number) => (path: string, bytes: Buffer) => {
  const tile = parseLogTilePath(path);
  const at = (index % 256) * 32;
  if (tile?.l === 0 && Math.floor(index / 256) === tile.n) bytes[at] = (bytes[at] ?? 0) ^ 0xff;
  return bytes;
};

describe('svc log watch against a log server built from protocol', () => {
  let s: LogServer;
  beforeAll(async () => {
    s = await startLogServer();
  });
  afterAll(() => new Promise<void>((resolve) => s.server.close(() => resolve())));
  const serve = (count: number) => {
    grow(s.log, count - s.log.size());
    s.size = count;
    s.note = undefined;
    s.doctor = undefined;
  };

  it('keeps the first checkpoint (keys on first use), passes consistent growth across tiles and keeps it', async () => {
    const dir = freshDir();
    serve(5);
    const first = await watch(s.base, dir);
    expect(first.code).toBe(0);
    expect(first.out).toContain(
      `trusting on first use the log keys ${s.base} lists (pin them with --log-key): ${VKEY}`,
    );
    expect(first.out).toContain('first checkpoint kept; its 5 leaves audited from the tiles');
    expect(stateOf(dir).tree_size).toBe(5);

    serve(300);
    const grown = await watch(s.base, dir);
    expect(grown.code).toBe(0);
    expect(grown.out).toContain(`OK  ${ORIGIN}  size 300  root ${s.log.root(300).toString('base64')}`);
    expect(grown.out).toContain('consistent with the kept size 5 (consistency proof; leaves 5..299 from the tiles)');
    expect(stateOf(dir)).toMatchObject({ tree_size: 300, checkpoint: sign(300, s.log.root(300)) });

    serve(777);
    expect((await watch(s.base, dir)).code).toBe(0);
    expect(stateOf(dir).tree_size).toBe(777);
    const same = await watch(s.base, dir);
    expect(same.code).toBe(0);
    expect(same.out).toMatch(/size 777 .*: unchanged since/);
  });

  it('catches a forged checkpoint of the same size signed with the same key: exit 1, both notes printed and kept', async () => {
    const dir = freshDir();
    serve(40);
    expect((await watch(s.base, dir)).code).toBe(0);
    const kept = stateOf(dir).checkpoint;
    // A dishonest operator signs another tree of 40 records with the platform key.
    s.note = sign(40, Buffer.alloc(32, 9));
    const forked = await watch(s.base, dir);
    expect(forked.code).toBe(1);
    expect(forked.out).toContain(
      'FORK  svc log watch: fork: two signed checkpoints of 40 records with different roots',
    );
    expect(forked.out).toContain(kept);
    expect(forked.out).toContain(s.note);
    const files = readdirSync(dir).filter((f) => f.startsWith('fork-'));
    expect(files).toHaveLength(1);
    const evidence = readFileSync(join(dir, files[0] ?? ''), 'utf8');
    expect(evidence).toContain(kept);
    expect(evidence).toContain(s.note);
    expect(stateOf(dir).checkpoint).toBe(kept);

    // A bigger forged tree that does not extend the kept one: the proof does not hold.
    grow(s.log, 10);
    s.note = sign(50, Buffer.alloc(32, 3));
    const unproven = await watch(s.base, dir);
    expect(unproven.code).toBe(1);
    expect(unproven.out).toContain(
      'fork: the server does not prove the checkpoint of 50 records extends the kept one of 40',
    );
    expect(stateOf(dir).checkpoint).toBe(kept);
  });

  it('names the leaf whose hash a tile serves altered: new leaves, leaves audited before, a first full audit', async () => {
    const dir = freshDir();
    serve(300);
    expect((await watch(s.base, dir)).code).toBe(0);
    serve(600);
    s.doctor = alterLeaf(517);
    const altered = await watch(s.base, dir);
    expect(altered.code).toBe(1);
    expect(altered.out).toContain(
      'FAIL  leaf 517: its hash in the tiles is not the one the signed checkpoint of 600 records holds (leaves 300..516 check out)',
    );
    expect(stateOf(dir).tree_size).toBe(300);

    // Leaf 290 was audited in the last run; its tile (256..) is read again for the new leaves.
    s.doctor = alterLeaf(290);
    const before = await watch(s.base, dir);
    expect(before.code).toBe(1);
    expect(before.out).toContain('FAIL  leaf 290: its hash in tile tile/8/0/001 is not the one audited before');

    // The row itself rewritten (as in the store): the server's proofs hold the rewritten hash too,
    // so which of the pair 516/517 it is cannot be told from what the server serves.
    const at = storedHashIndex(0, 517);
    const original = s.log.stored[at] ?? Buffer.alloc(32);
    s.doctor = undefined;
    s.log.stored[at] = Buffer.alloc(32, 5);
    const rewritten = await watch(s.base, dir);
    s.log.stored[at] = original;
    expect(rewritten.code).toBe(1);
    expect(rewritten.out).toContain(
      "FAIL  leaf 516 or 517: their hashes in the tiles are not the ones the signed checkpoint of 600 records holds, and the server's proofs hold the same hashes (leaves 300..515 check out)",
    );

    s.doctor = alterLeaf(7);
    const full = await watch(s.base, freshDir());
    expect(full.code).toBe(1);
    expect(full.out).toContain(
      'FAIL  leaf 7: its hash in the tiles is not the one the signed checkpoint of 600 records holds',
    );
    s.doctor = undefined;
    expect((await watch(s.base, dir)).code).toBe(0);
  });

  it('catches a rollback to a smaller tree', async () => {
    const dir = freshDir();
    serve(700);
    expect((await watch(s.base, dir)).code).toBe(0);
    s.size = 650;
    const rolled = await watch(s.base, dir);
    expect(rolled.code).toBe(1);
    expect(rolled.out).toContain('ROLLBACK  svc log watch: rollback: the log shrank from 700 to 650 records');
    expect(readdirSync(dir).some((f) => f.startsWith('rollback-'))).toBe(true);
    expect(stateOf(dir).tree_size).toBe(700);
  });

  it('refuses a checkpoint signed by a key other than --log-key, and warns (exit 2) when the server is unreachable', async () => {
    const dir = freshDir();
    serve(700);
    const other = noteVerifierKey(ORIGIN, publicKeyHex(generateEd25519().privateKey));
    const refused = await watch(s.base, dir, '--log-key', other);
    expect(refused.code).toBe(1);
    expect(refused.out).toContain(`FAIL  the checkpoint of ${s.base} does not verify: no signature by a known key`);
    expect(existsSync(join(dir, 'state.json'))).toBe(false);

    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const away = await watch(`http://127.0.0.1:${port}`, dir, '--log-key', VKEY);
    expect(away.code).toBe(2);
    expect(away.err).toMatch(
      /^WARN {2}cannot reach http:\/\/127\.0\.0\.1:\d+\/api\/v1\/log\/checkpoint .*nothing checked/,
    );
    await expect(watch('file:///etc/passwd', dir)).rejects.toThrow("the log's URL must be http or https, got file:");
  });
});
