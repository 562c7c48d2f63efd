import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../../test/harness.js';
import { loadTokenBox, rotateTokenKey } from './token-box.js';

describe('token box (AES-256-GCM at rest, key id stored, rotation)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => t.close());

  it('seals under the current key and opens it again; the sealed text never holds the token', async () => {
    const box = await loadTokenBox(t.ctx.db);
    const { sealed, keyId } = box.seal('ghp_plainSecret', 'work_repository:wrepo_1');
    expect(keyId).toBe(box.currentKeyId);
    expect(sealed.startsWith(`v1.${keyId}.`)).toBe(true);
    expect(sealed).not.toContain('ghp_plainSecret');
    expect(box.seal('ghp_plainSecret', 'work_repository:wrepo_1').sealed).not.toBe(sealed);
    expect(box.open(sealed, 'work_repository:wrepo_1')).toBe('ghp_plainSecret');
  });

  it('refuses a value moved to another purpose or altered', async () => {
    const box = await loadTokenBox(t.ctx.db);
    const { sealed } = box.seal('ghp_x', 'work_repository:wrepo_1');
    expect(() => box.open(sealed, 'work_repository:wrepo_2')).toThrow();
    const parts = sealed.split('.');
    const ct = Buffer.from(parts[4] ?? '', 'base64url');
    ct[0] = (ct[0] ?? 0) ^ 1;
    expect(() =>
      box.open([...parts.slice(0, 4), ct.toString('base64url')].join('.'), 'work_repository:wrepo_1'),
    ).toThrow();
  });

  it('after a rotation seals with the new key and still opens what the old one sealed', async () => {
    const before = await loadTokenBox(t.ctx.db);
    const old = before.seal('ghp_old', 'p');
    const newId = await rotateTokenKey(t.ctx.db);
    expect(newId).not.toBe(before.currentKeyId);
    const after = await loadTokenBox(t.ctx.db);
    expect(after.currentKeyId).toBe(newId);
    expect(after.seal('ghp_new', 'p').keyId).toBe(newId);
    expect(after.open(old.sealed, 'p')).toBe('ghp_old');
  });
});
