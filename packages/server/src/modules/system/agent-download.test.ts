import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyHex } from '@svc/protocol';
import { createTestApp, type TestApp } from '../../../test/harness.js';
import { SERVICE_VERSION } from '../../platform/version.js';
import { useAgentDownloadsDir } from './agent-download.js';

const FILE = `svc-${SERVICE_VERSION}.tgz`;

describe('GET /api/v1/downloads: the node agent tarball, hashed and signed by the platform key', () => {
  let t: TestApp;
  const dir = mkdtempSync(join(tmpdir(), 'svc-downloads-'));
  beforeAll(async () => {
    t = await createTestApp();
    useAgentDownloadsDir(t.ctx, dir);
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('before the tarball exists: the listing says why, the file is a 404 saying why, the server runs', async () => {
    const listing = (await t.app.inject({ method: 'GET', url: '/api/v1/downloads' })).json();
    expect(listing.agent).toMatchObject({ status: 'unavailable', file: FILE });
    expect(listing.agent.reason).toContain(`${FILE} is not built in ${dir}`);
    expect(listing.agent.sha256).toBeUndefined();
    const file = await t.app.inject({ method: 'GET', url: `/api/v1/downloads/${FILE}` });
    expect(file.statusCode).toBe(404);
    expect(file.json()).toMatchObject({ error: 'not_found' });
    expect(file.json().message).toContain('is not built');
  });

  it('lists url, SHA-256 and an Ed25519 signature that verifies over the served bytes with the published platform key; a changed byte fails', async () => {
    const bytes = randomBytes(4096);
    writeFileSync(join(dir, FILE), bytes);
    const listing = (await t.app.inject({ method: 'GET', url: '/api/v1/downloads' })).json();
    const url = `${t.ctx.config.publicUrl}/api/v1/downloads/${FILE}`;
    expect(listing.agent).toMatchObject({ status: 'ready', url, size_bytes: 4096 });
    expect(listing.install_commands['linux-x64']).toBe(
      `npm install -g ${url}\nsvc node --server ${t.ctx.config.publicUrl} --api-key <OPERATOR_API_KEY>`,
    );
    const served = await t.app.inject({ method: 'GET', url: `/api/v1/downloads/${FILE}` });
    expect(served.statusCode).toBe(200);
    expect(served.headers['content-type']).toBe('application/gzip');
    expect(served.rawPayload.equals(bytes)).toBe(true);
    expect(listing.agent.sha256).toBe(createHash('sha256').update(served.rawPayload).digest('hex'));

    const keys = (await t.app.inject({ method: 'GET', url: '/api/v1/keys/platform' })).json() as {
      keys: { key_id: string; public_key_hex: string }[];
    };
    const key = keys.keys.find((k) => k.key_id === listing.agent.signature.key_id);
    expect(key?.public_key_hex).toBe(listing.agent.signature.public_key_hex);
    expect(listing.agent.signature.signed_bytes).toContain('exact bytes of the file served at url');
    expect(verifyHex(served.rawPayload, listing.agent.signature.signature_hex, key?.public_key_hex ?? '')).toBe(true);
    const changed = Buffer.from(served.rawPayload);
    changed[100] = (changed[100] ?? 0) ^ 0x01;
    expect(verifyHex(changed, listing.agent.signature.signature_hex, key?.public_key_hex ?? '')).toBe(false);
  });

  it('a rebuilt tarball is hashed and signed again; other names are 404', async () => {
    const before = (await t.app.inject({ method: 'GET', url: '/api/v1/downloads' })).json().agent;
    const bytes = randomBytes(5000);
    writeFileSync(join(dir, FILE), bytes);
    const after = (await t.app.inject({ method: 'GET', url: '/api/v1/downloads' })).json().agent;
    expect(after.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
    expect(after.sha256).not.toBe(before.sha256);
    expect(verifyHex(bytes, after.signature.signature_hex, after.signature.public_key_hex)).toBe(true);
    for (const name of ['svc-0.0.1.tgz', '..%2Fpackage.json', 'svc.tgz'])
      expect((await t.app.inject({ method: 'GET', url: `/api/v1/downloads/${name}` })).statusCode).toBe(404);
  });
});
