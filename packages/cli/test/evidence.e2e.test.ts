import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleHash, generateEd25519, publicKeyHex } from '@svc/protocol';
import { startOpenAITestServer, type OpenAITestServer } from '@svc/node-agent/testing';
import { createTestStore, type TestStore } from '@svc/server/testing';
import { main } from '../src/main.js';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

// npm test: one store: the subject is `svc verify` and `svc keys rotate` as processes; bundles and signing after a
// rotation run on both stores in evidence.test.ts, evidence.gateway.test.ts and log.test.ts (packages/server).

interface Check {
  name: string;
  ok: boolean;
  reason: string;
}
type Json = Record<string, unknown>;

/** Runs `svc verify` as its own process; nothing else is running by then. */
async function svcVerify(args: string[]): Promise<{ code: number | string; out: string; checks: Check[] }> {
  const p = spawnSvc(['verify', ...args]);
  const code = await p.exited;
  const out = p.stdout() + p.stderr();
  const checks = args.includes('--json') ? (JSON.parse(p.stdout()) as { checks: Check[] }).checks : [];
  return { code, out, checks };
}

/**
 * The same command in this process (main(['verify', ...]) with stdout captured): the many tamper
 * cases would otherwise pay a process start each.
 */
async function svcVerifyHere(args: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array) => {
    out += String(chunk);
    return true;
  }) as typeof process.stdout.write;
  try {
    return { code: await main(['verify', ...args]), out };
  } finally {
    process.stdout.write = write;
  }
}

/** Sets the value at a path inside parsed JSON. */
function setAt(root: unknown, path: (string | number)[], value: unknown): void {
  let at = root as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) at = at[key] as Record<string | number, unknown>;
  at[path[path.length - 1] ?? ''] = value;
}

describe('svc verify and svc keys rotate, with real processes and the server stopped', () => {
  let store: TestStore;
  let upstream: OpenAITestServer;
  let dir: string;
  let server: SpawnedSvc | undefined;
  let node: SpawnedSvc | undefined;
  let base = '';
  let buyerKey = '';
  let jobBundle = '';
  let chatBundle = '';
  let trustFile = '';
  const serverEnv = () => ({
    SVC_DATA_DIR: store.dataDir,
    SVC_PORT: '0',
    SVC_LOG_LEVEL: 'warn',
    ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
  });
  const api = async (path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method: body ? 'POST' : 'GET',
      headers: { authorization: `Bearer ${buyerKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, text: await res.text() };
  };
  const stopServer = async () => {
    node?.child.kill('SIGKILL');
    if (node) await node.exited;
    node = undefined;
    server?.child.kill('SIGTERM');
    if (server) await server.exited;
    server = undefined;
  };

  beforeAll(async () => {
    store = await createTestStore();
    upstream = await startOpenAITestServer();
    dir = mkdtempSync(join(tmpdir(), 'svc-verify-'));
    server = spawnSvc(['serve'], serverEnv());
    base = await waitForUrl(server);
    const signup = async (email: string, credential: 'api_key' | 'token' = 'api_key') =>
      (
        (await (
          await fetch(`${base}/api/v1/auth/signup`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ email, password: 'evidence e2e password' }),
          })
        ).json()) as { api_key: string; token: string }
      )[credential];
    // The operator's node key, made by the operator's session (a buyer key may not grant operator);
    // then the buyer is who the tests act as.
    buyerKey = await signup('operator@evidence.test', 'token');
    const nodeKey = (
      JSON.parse((await api('/api/v1/auth/api-keys', { label: 'node', scopes: ['operator'] })).text) as {
        api_key: string;
      }
    ).api_key;
    buyerKey = await signup('buyer@evidence.test');
    node = spawnSvc(
      [
        'node',
        '--server',
        base,
        '--data-dir',
        join(dir, 'node'),
        '--country',
        'CA',
        '--region',
        'ca-central',
        '--upstream',
        upstream.url,
        '--model',
        'tinyllama',
      ],
      { SVC_NODE_API_KEY: nodeKey },
    );
    await until('node registration', async () => /registered (node_[a-z0-9]+)/.exec(node?.stdout() ?? '')?.[1]);

    const submitted = JSON.parse(
      (
        await api('/api/v1/marketplace/jobs', {
          kind: 1,
          budget: 1,
          max_price_per_unit: 0.01,
          currency: 'CAD',
          model: 'tinyllama',
          inline_text: 'what is a receipt?',
        })
      ).text,
    ) as { job_id: string };
    await until('job completion', async () =>
      (JSON.parse((await api(`/api/v1/marketplace/jobs/${submitted.job_id}`)).text) as Json).status === 'completed'
        ? true
        : undefined,
    );
    const chat = JSON.parse(
      (await api('/v1/chat/completions', { model: 'tinyllama', messages: [{ role: 'user', content: 'prove it' }] }))
        .text,
    ) as { id: string };

    jobBundle = join(dir, 'job-bundle.json');
    chatBundle = join(dir, 'chat-bundle.json');
    trustFile = join(dir, 'platform-keys.json');
    writeFileSync(jobBundle, (await api(`/api/v1/jobs/${submitted.job_id}/evidence/bundle`)).text);
    writeFileSync(chatBundle, (await api(`/api/v1/jobs/${chat.id}/evidence/bundle`)).text);
    writeFileSync(trustFile, (await api('/api/v1/keys/platform')).text);
    await stopServer();
  }, 180_000);

  afterAll(async () => {
    await stopServer();
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
    await store.drop();
  });

  it('verifies a job bundle and a gateway bundle with no server running: one line per check, exit 0', async () => {
    expect(
      await fetch(`${base}/api/v1/health`).then(
        () => 'up',
        () => 'down',
      ),
    ).toBe('down');
    for (const file of [jobBundle, chatBundle]) {
      const text = await svcVerify([file, '--trust-file', trustFile]);
      expect(text.out).toMatch(/^PASS {2}bundle_hash {2}[0-9a-f]{64}$/m);
      expect(text.out).toMatch(/^PASS {2}certificate_signature /m);
      expect(text.out).toMatch(/^PASS {2}receipt_signature\[rcpt_/m);
      // The run's entry in the transparency log, its checkpoint signed by a pinned key.
      expect(text.out).toMatch(/^PASS {2}log_leaf {2}run run_\S+, \d+ events, root [0-9a-f]{64}$/m);
      expect(text.out).toMatch(
        /^PASS {2}log_checkpoint_signature {2}tree of \d+ signed by \S+\+[0-9a-f]{8}, among the pinned keys$/m,
      );
      expect(text.out).toMatch(/^PASS {2}log_inclusion {2}record \d+ of \d+$/m);
      expect(text.out).toMatch(/verified: all \d+ checks passed/);
      expect(text.code).toBe(0);
    }
    const json = await svcVerifyHere([jobBundle, '--json']);
    expect(json.code).toBe(0);
    const checks = (JSON.parse(json.out) as { checks: Check[] }).checks;
    expect(checks.find((c) => c.name === 'signer_key')?.reason).toContain('not pinned');
    expect(checks.map((c) => c.name)).toEqual(
      expect.arrayContaining([
        'parse',
        'bundle_type',
        'bundle_hash',
        'graph_structure',
        'merkle_root',
        'certificate_signature',
        'signer_key',
        'receipts_complete',
      ]),
    );
  }, 60_000);

  it.each<[string, (string | number)[], unknown, string]>([
    ['an event summary', ['evidence', 'events', 0, 'summary'], 'rewritten', 'event_hash[1]'],
    ['an event type', ['evidence', 'events', 3, 'event_type'], 'routing.forged', 'event_hash[4]'],
    ['event metadata', ['evidence', 'events', 1, 'metadata', 'strict_jurisdiction'], 'US', 'event_hash[2]'],
    ['an event timestamp', ['evidence', 'events', 2, 'created_at'], '2020-01-01T00:00:00.000Z', 'event_hash[3]'],
    ['an edge', ['evidence', 'edges', 0, 'edge_type'], 'caused_by', 'event_hash[2]'],
    ['a receipt field', ['receipts', 0, 'metering_units'], 1, 'receipt_signature[{receipt}]'],
    ['a receipt signature', ['receipts', 0, 'signature'], '0'.repeat(128), 'receipt_binding[{receipt}]'],
    ['the root', ['evidence', 'run', 'root_hash'], 'f'.repeat(64), 'merkle_root'],
    [
      'the certificate signature',
      ['evidence', 'certificate', 'signature_hex'],
      '0'.repeat(128),
      'certificate_signature',
    ],
    ['the bundle hash', ['bundle_hash'], '0'.repeat(64), 'bundle_hash'],
    ["the log leaf's root hash", ['verifier', 'log', 'leaf', 'root_hash'], 'f'.repeat(64), 'log_leaf'],
    ['the log leaf index', ['verifier', 'log', 'leaf_index'], 1e6, 'log_inclusion'],
  ])(
    'altering %s fails verification and names the check',
    async (_, path, value, check) => {
      const bundle = JSON.parse(readFileSync(jobBundle, 'utf8')) as Json;
      const receiptId = String(((bundle.receipts as Json[])[0] ?? {}).id);
      setAt(bundle, path, value);
      const file = join(dir, `tampered-${path.join('-')}.json`);
      writeFileSync(file, JSON.stringify(bundle));
      // One case through a real process, the rest through the same code in this one.
      const result =
        check === 'bundle_hash'
          ? await svcVerify([file, '--trust-file', trustFile])
          : await svcVerifyHere([file, '--trust-file', trustFile]);
      expect(result.code).toBe(1);
      expect(result.out).toContain(`FAIL  ${check.replace('{receipt}', receiptId)}  `);
      expect(result.out).toMatch(/NOT VERIFIED: \d+ of \d+ checks failed/);
    },
    30_000,
  );

  it('refuses duplicate keys, unknown versions, oversized input and keys it was not told to trust', async () => {
    const text = readFileSync(jobBundle, 'utf8');
    const dup = join(dir, 'dup.json');
    writeFileSync(dup, text.replace('{"type":', '{"type":"svc.evidence_bundle.v1","type":'));
    expect((await svcVerify([dup])).out).toMatch(/FAIL {2}parse {2}duplicate key "type"/);
    const v2 = join(dir, 'v2.json');
    writeFileSync(v2, text.replace('"svc.evidence_bundle.v1"', '"svc.evidence_bundle.v2"'));
    expect((await svcVerifyHere([v2])).out).toMatch(/FAIL {2}bundle_type/);
    const big = await svcVerify([jobBundle, '--max-bytes', '1000']);
    expect([big.code, big.out]).toEqual([2, expect.stringContaining('larger than 1000 bytes')]);
    // A real key that did not sign ('ab'.repeat(32) is not a curve point: refused as bad usage).
    const other = await svcVerifyHere([jobBundle, '--public-key', publicKeyHex(generateEd25519().publicKey)]);
    expect(other.code).toBe(1);
    expect(other.out).toMatch(/FAIL {2}signer_key {2}signer [0-9a-f]{64} is not among the pinned keys/);
    expect((await svcVerifyHere([jobBundle, '--public-key', 'XYZ'])).code).toBe(2);
    expect((await svcVerifyHere([jobBundle, '--public-key', 'ab'.repeat(32)])).code).toBe(2);
    expect((await svcVerifyHere([join(dir, 'missing.json')])).code).toBe(2);

    // A bundle made before the log (no verifier.log): reported absent, failed only when required.
    const old = JSON.parse(text) as { verifier: Json; bundle_hash?: string };
    delete old.verifier.log;
    delete old.bundle_hash;
    const absent = join(dir, 'before-the-log.json');
    writeFileSync(absent, JSON.stringify({ ...old, bundle_hash: bundleHash(old) }));
    const lenient = await svcVerifyHere([absent, '--trust-file', trustFile]);
    expect(lenient.code).toBe(0);
    expect(lenient.out).toMatch(/^ABSENT {2}log {2}the bundle has no verifier\.log/m);
    const strict = await svcVerifyHere([absent, '--trust-file', trustFile, '--require-log']);
    expect(strict.code).toBe(1);
    expect(strict.out).toMatch(/required \(--require-log\)$/m);
  }, 60_000);

  it('svc keys rotate: new runs are signed by the new key, old bundles still verify against the published keys', async () => {
    const before = JSON.parse(readFileSync(trustFile, 'utf8')) as {
      keys: { key_id: string; public_key_hex: string }[];
    };
    const rotate = spawnSvc(['keys', 'rotate'], serverEnv());
    expect(await rotate.exited).toBe(0);
    expect(rotate.stdout()).toMatch(/^retired pk_[0-9a-f]{16} .*\nactive {2}pk_[0-9a-f]{16} /m);

    server = spawnSvc(['serve'], serverEnv());
    base = await waitForUrl(server);
    const keys = JSON.parse((await api('/api/v1/keys/platform')).text) as {
      keys: { key_id: string; public_key_hex: string; valid_until: string | null; active: boolean }[];
    };
    expect(keys.keys).toHaveLength(before.keys.length + 1);
    const retired = keys.keys.find((k) => k.key_id === before.keys[0]?.key_id);
    const active = keys.keys.find((k) => k.active);
    expect(retired?.valid_until).not.toBeNull();
    expect(active?.key_id).not.toBe(retired?.key_id);

    const submitted = JSON.parse(
      (
        await api('/api/v1/marketplace/jobs', {
          kind: 1,
          budget: 1,
          max_price_per_unit: 0.01,
          currency: 'CAD',
          model: 'tinyllama',
          inline_text: 'after rotation',
        })
      ).text,
    ) as { job_id: string };
    await api(`/api/v1/marketplace/jobs/${submitted.job_id}/cancel`, {});
    const graph = JSON.parse((await api(`/api/v1/jobs/${submitted.job_id}/evidence`)).text) as {
      certificate: { signer_public_key_hex: string; verified: boolean };
    };
    expect(graph.certificate).toMatchObject({ signer_public_key_hex: active?.public_key_hex, verified: true });
    const newBundle = join(dir, 'after-rotation.json');
    writeFileSync(newBundle, (await api(`/api/v1/jobs/${submitted.job_id}/evidence/bundle`)).text);
    const newTrust = join(dir, 'platform-keys-2.json');
    writeFileSync(newTrust, JSON.stringify(keys));
    await stopServer();

    expect((await svcVerify([newBundle, '--trust-file', newTrust])).code).toBe(0);
    expect((await svcVerifyHere([jobBundle, '--trust-file', newTrust])).code).toBe(0);
    // Pinning only the old key refuses what the new key signed.
    const oldOnly = await svcVerifyHere([newBundle, '--trust-file', trustFile]);
    expect(oldOnly.code).toBe(1);
    expect(oldOnly.out).toMatch(/FAIL {2}signer_key/);
    // A run signed by the old key after its retirement would be refused: check the window logic.
    const lying = join(dir, 'retired-window.json');
    writeFileSync(
      lying,
      JSON.stringify({
        keys: [
          {
            public_key_hex: retired?.public_key_hex,
            valid_from: '2020-01-01T00:00:00.000Z',
            valid_until: '2020-01-02T00:00:00.000Z',
          },
        ],
      }),
    );
    expect((await svcVerifyHere([jobBundle, '--trust-file', lying])).out).toMatch(
      /FAIL {2}signer_key {2}signed at .* after the key was retired/,
    );
  }, 120_000);
});
