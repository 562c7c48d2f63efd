import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { privateKeyFromSeedHex, publicKeyHex } from '@svc/protocol';
import { IdentityError, loadOrCreateIdentity, readNodeRecord, writeNodeRecord } from '../src/index.js';

const dirs: string[] = [];
async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-node-id-'));
  dirs.push(dir);
  return dir;
}
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

describe('node identity', () => {
  it('creates node-key.json with mode 0600 and reuses it across restarts', async () => {
    const dir = join(await tempDir(), 'data');
    const first = await loadOrCreateIdentity(dir);
    const file = JSON.parse(await readFile(join(dir, 'node-key.json'), 'utf8')) as {
      seed_hex: string;
      public_key_hex: string;
    };
    expect(file.public_key_hex).toBe(first.publicKeyHex);
    expect(publicKeyHex(privateKeyFromSeedHex(file.seed_hex))).toBe(first.publicKeyHex);
    expect((await stat(join(dir, 'node-key.json'))).mode & 0o777).toBe(0o600);
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    const second = await loadOrCreateIdentity(dir);
    expect(second.publicKeyHex).toBe(first.publicKeyHex);
    expect(await readFile(join(dir, 'node-key.json'), 'utf8')).toContain(file.seed_hex);
  });

  it('refuses a corrupt key file instead of silently making a new node', async () => {
    const dir = await tempDir();
    await writeFile(join(dir, 'node-key.json'), '{"seed_hex": "zz"}');
    await expect(loadOrCreateIdentity(dir)).rejects.toThrow(IdentityError);
    await writeFile(
      join(dir, 'node-key.json'),
      JSON.stringify({ seed_hex: '00'.repeat(32), public_key_hex: '11'.repeat(32) }),
    );
    await expect(loadOrCreateIdentity(dir)).rejects.toThrow(/does not match/);
    await writeFile(join(dir, 'node-key.json'), 'not json');
    await expect(loadOrCreateIdentity(dir)).rejects.toThrow(/not valid JSON/);
  });

  it('tightens a key file left with loose permissions', async () => {
    const dir = await tempDir();
    await writeFile(join(dir, 'node-key.json'), JSON.stringify({ seed_hex: '00'.repeat(32) }), { mode: 0o644 });
    const identity = await loadOrCreateIdentity(dir);
    expect(identity.publicKeyHex).toBe('3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29');
    expect((await stat(join(dir, 'node-key.json'))).mode & 0o777).toBe(0o600);
  });

  it('stores and reads the registration record node.json', async () => {
    const dir = await tempDir();
    expect(await readNodeRecord(dir)).toBeUndefined();
    await writeNodeRecord(dir, { node_id: 'node_1', server: 'http://127.0.0.1:1' });
    expect(await readNodeRecord(dir)).toEqual({ node_id: 'node_1', server: 'http://127.0.0.1:1' });
    expect((await stat(join(dir, 'node.json'))).mode & 0o777).toBe(0o600);
  });
});
