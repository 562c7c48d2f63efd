import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestApp, signUp, TEST_STORE_KIND, type TestApp, type TestBuyer } from '../../../test/harness.js';
import { SERVICE_VERSION } from '../../platform/version.js';
import { formatUptime } from './service.js';

describe('service endpoints', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  beforeAll(async () => {
    t = await createTestApp();
    buyer = await signUp(t.app);
  });
  afterAll(() => t.close());

  it('health reports ok, uptime, the package version and the store', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/health' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ ok: true, version: SERVICE_VERSION, store: TEST_STORE_KIND });
    expect(res.json().uptime).toMatch(/^\d+s$|m/);
  });

  it('health answers 503 with ok=false when the store is gone', async () => {
    const other = await createTestApp();
    await other.ctx.db.close();
    const res = await other.app.inject({ method: 'GET', url: '/api/v1/health' });
    expect(res.statusCode).toBe(503);
    expect(res.json().ok).toBe(false);
    await other.app.close();
    await other.store.drop();
  });

  it('config carries job_spec_version, dev_mode and the runner', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/config', headers: bearer(buyer.apiKey) });
    expect(res.json()).toMatchObject({
      job_spec_version: '2026-11-01',
      dev_mode: false,
      default_runner_image: 'process',
      currency: 'CAD',
    });
  });

  it('inference health counts nodes from the store', async () => {
    const before = (
      await t.app.inject({ method: 'GET', url: '/api/v1/inference/health', headers: bearer(buyer.apiKey) })
    ).json();
    expect(before).toEqual({
      chat_models_in_catalog: 3,
      chat_models_with_capacity: 0,
      online_nodes_heartbeat_5m: 0,
      registered_nodes: 0,
    });
    await t.ctx.db.query(
      `INSERT INTO nodes (id, pubkey, models, last_seen) VALUES
        ('n1', 'a', '{phi-4,all-MiniLM-L6-v2}', now()),
        ('n2', 'b', '{tinyllama}', now() - interval '2 minutes'),
        ('n3', 'c', '{svc-llama-3.2-3b}', now() - interval '1 hour')`,
    );
    const after = (
      await t.app.inject({ method: 'GET', url: '/api/v1/inference/health', headers: bearer(buyer.apiKey) })
    ).json();
    expect(after).toEqual({
      chat_models_in_catalog: 3,
      chat_models_with_capacity: 1,
      online_nodes_heartbeat_5m: 2,
      registered_nodes: 3,
    });
  });

  it('downloads names the agent version and a start command with this server URL', async () => {
    const res = (await t.app.inject({ method: 'GET', url: '/api/v1/downloads' })).json();
    expect(res.version).toBe(SERVICE_VERSION);
    expect(res.install_commands['linux-x64']).toContain(`--server ${t.ctx.config.publicUrl}`);
  });

  it('publishes the active platform signing key', async () => {
    const res = (await t.app.inject({ method: 'GET', url: '/api/v1/keys/platform' })).json();
    expect(res.keys).toHaveLength(1);
    expect(res.keys[0]).toMatchObject({
      key_id: t.ctx.secrets.active.key_id,
      public_key_hex: t.ctx.secrets.active.public_key_hex,
      active: true,
      valid_until: null,
    });
  });

  it('formats uptime compactly', () => {
    expect(formatUptime(5)).toBe('5s');
    expect(formatUptime(65)).toBe('1m05s');
    expect(formatUptime(3 * 3600 + 7 * 60 + 12)).toBe('3h07m12s');
    expect(formatUptime(2 * 86400 + 5)).toBe('2d00h00m05s');
  });
});
