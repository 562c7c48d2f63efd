import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestStore, type TestStore } from '@svc/server/testing';
import { spawnSvc, waitForUrl } from './spawn.js';

describe('svc serve as a real process', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createTestStore();
  });
  afterAll(() => store.drop());
  const env = () => ({
    SVC_DATA_DIR: store.dataDir,
    SVC_PORT: '0',
    ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
  });

  it('serves, stops cleanly on SIGTERM, and keeps its data across a restart', async () => {
    const pepper = 'pepper-that-must-never-be-logged-0123456789';
    // Through bin/svc.js and tsx, as a user starts it (the other tests run the compiled svc, spawn.ts).
    const first = spawnSvc(['serve'], { ...env(), SVC_KEY_PEPPER: pepper }, { bin: 'tsx' });
    const url = await waitForUrl(first);
    const health = (await (await fetch(`${url}/api/v1/health`)).json()) as { ok: boolean };
    expect(health.ok).toBe(true);
    const keysBefore = await (await fetch(`${url}/api/v1/keys/platform`)).json();
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(first.stdout() + first.stderr()).toContain('shutting down');
    expect(first.stdout() + first.stderr()).not.toContain(pepper);

    const second = spawnSvc(['serve'], { ...env(), SVC_KEY_PEPPER: pepper });
    const url2 = await waitForUrl(second);
    const keysAfter = await (await fetch(`${url2}/api/v1/keys/platform`)).json();
    expect(keysAfter).toEqual(keysBefore);
    second.child.kill('SIGINT');
    expect(await second.exited).toBe(0);
    // Two real server starts, the first through tsx: tens of seconds on a loaded machine.
  }, 120_000);

  it('refuses a bad configuration value with a message naming it, exit code 2', async () => {
    const p = spawnSvc(['serve'], { ...env(), SVC_PORT: 'eighty' });
    expect(await p.exited).toBe(2);
    expect(p.stderr()).toContain("SVC_PORT must be an integer from 0 to 65535, got 'eighty'");
  });

  it('does not print a database password', async () => {
    const p = spawnSvc(['serve'], { ...env(), DATABASE_URL: 'mysql://user:s3cretpw@127.0.0.1/db' });
    expect(await p.exited).toBe(2);
    expect(p.stderr()).toContain('DATABASE_URL must use postgres: or postgresql:');
    expect(p.stderr()).not.toContain('s3cretpw');
  });

  it('rejects unknown commands and options', async () => {
    const unknown = spawnSvc(['frobnicate']);
    expect(await unknown.exited).toBe(2);
    expect(unknown.stderr()).toContain("unknown command 'frobnicate'");
    const badFlag = spawnSvc(['serve', '--prot', '1']);
    expect(await badFlag.exited).toBe(2);
    expect(badFlag.stderr()).toContain('unknown option --prot');
  });
});
