import { mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSnpTestChain, type SnpTestChain } from '@svc/protocol/attestation/testing';
import { bearer, createAttestationVerifier, createKey, signUp, startTestServer } from '@svc/server/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  attestWithTsm,
  collectTsmReport,
  createNodeAgent,
  createNodeClient,
  loadOrCreateIdentity,
  vcekFromAuxblob,
  type AgentEvent,
} from '../src/index.js';

const MEASUREMENT = Buffer.alloc(48, 0x24);
const VCEK_GUID_BYTES = Buffer.from('8d75da6364e66445adc5f4b93be8accd', 'hex');

/** An SEV-SNP certificate table holding one VCEK entry. */
function certTable(vcek: Buffer): Buffer {
  const header = Buffer.alloc(48);
  VCEK_GUID_BYTES.copy(header, 0);
  header.writeUInt32LE(48, 16);
  header.writeUInt32LE(vcek.length, 20);
  return Buffer.concat([header, vcek]);
}

/**
 * A stand-in for the kernel's configfs-tsm: answers every new entry's inblob with an SNP report
 * signed under the test chain (and the certificate table in auxblob), as the sev_guest provider does.
 */
function fakeKernel(root: string, chain: SnpTestChain, withAux: boolean): () => void {
  const done = new Set<string>();
  let stopped = false;
  // One scan at a time: two overlapping scans would both answer an entry and race on its temp files.
  let scanning = false;
  const timer = setInterval(() => {
    if (scanning) return;
    scanning = true;
    (async () => {
      for (const entry of await readdir(root).catch(() => [])) {
        if (done.has(entry) || entry.startsWith('.')) continue;
        const inblob = await readFile(join(root, entry, 'inblob')).catch(() => null);
        if (!inblob || inblob.length !== 64) continue;
        done.add(entry);
        // Whole files at once, as the kernel's attributes read.
        const put = async (name: string, data: string | Buffer) => {
          await writeFile(join(root, `.${entry}-${name}`), data);
          await rename(join(root, `.${entry}-${name}`), join(root, entry, name));
        };
        await put('generation', '1\n');
        await put('provider', 'sev_guest\n');
        if (withAux) await put('auxblob', certTable(chain.vcekDer));
        await put('outblob', chain.signReport({ reportData: inblob, measurement: MEASUREMENT }));
      }
    })()
      .catch((err: unknown) => {
        // An entry removed while it was being answered (by the agent, or by the test once stopped)
        // is abandoned, as the kernel abandons it.
        if (!stopped && (err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      })
      .finally(() => {
        scanning = false;
      });
  }, 5);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}

describe('the agent attests through configfs-tsm against the real server', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let chain: SnpTestChain;
  let operatorKey: string;
  let dir: string;
  beforeAll(async () => {
    server = await startTestServer({ env: { SVC_TEE_MEASUREMENTS: MEASUREMENT.toString('hex') } });
    chain = await createSnpTestChain();
    // Trusted by this test only.
    server.ctx.attestation = createAttestationVerifier(server.ctx.config.tee, { extraSnpRoots: [chain.pin] });
    operatorKey = await createKey(server.app, await signUp(server.app), ['operator']);
    dir = await mkdtemp(join(tmpdir(), 'svc-tsm-'));
  });
  afterAll(async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('reads the VCEK from the certificate table', () => {
    expect(vcekFromAuxblob(certTable(Buffer.from('vcek-der')))?.toString()).toBe('vcek-der');
    expect(vcekFromAuxblob(Buffer.alloc(24))).toBeNull();
  });

  it('challenge -> configfs-tsm report bound to it -> verified, listed as verified', async () => {
    const root = join(dir, 'report');
    await mkdir(root);
    const stop = fakeKernel(root, chain, true);
    try {
      const identity = await loadOrCreateIdentity(join(dir, 'node'));
      const client = createNodeClient({ server: server.url, apiKey: operatorKey, identity });
      await client.register({ country: 'CH', models: [], attestation_method: 2 });
      const outcome = await attestWithTsm(client, { root });
      expect(outcome.checks.filter((c) => !c.ok)).toEqual([]);
      expect(outcome).toMatchObject({ verified: true, attestation: 'amd-sev-snp:verified' });
      const list = (await (await fetch(`${server.url}/api/v1/nodes`, { headers: bearer(operatorKey) })).json()) as {
        nodes: Array<{ attestation: string }>;
      };
      expect(list.nodes.map((n) => n.attestation)).toEqual(['amd-sev-snp:verified']);
    } finally {
      stop();
    }
  });

  it('without a VCEK from the host or a file, says what is missing', async () => {
    const root = join(dir, 'report-noaux');
    await mkdir(root);
    const stop = fakeKernel(root, chain, false);
    try {
      const identity = await loadOrCreateIdentity(join(dir, 'node2'));
      const client = createNodeClient({ server: server.url, apiKey: operatorKey, identity });
      await client.register({ country: 'CH', models: [] });
      await expect(attestWithTsm(client, { root })).rejects.toThrow('the host supplied no VCEK');
      const vcekFile = join(dir, 'vcek.der');
      await writeFile(vcekFile, chain.vcekDer);
      expect((await attestWithTsm(client, { root, vcekFile })).verified).toBe(true);
    } finally {
      stop();
    }
  });

  it('the agent attests on start when configfs-tsm is present, and reports the outcome', async () => {
    const root = join(dir, 'report-agent');
    await mkdir(root);
    const stop = fakeKernel(root, chain, true);
    const events: AgentEvent[] = [];
    const agent = createNodeAgent({
      server: server.url,
      apiKey: operatorKey,
      dataDir: join(dir, 'agent'),
      allowProcessRunner: true,
      country: 'CH',
      tee: { root },
      onEvent: (e) => events.push(e),
    });
    try {
      await agent.start();
      expect(
        events.find((e) => e.event === 'attested'),
        JSON.stringify(events),
      ).toMatchObject({ event: 'attested', attestation: 'amd-sev-snp:verified', verified: true, failed: [] });
    } finally {
      await agent.stop({ graceMs: 0 });
      stop();
    }
  });

  it('refuses report_data that is not 64 bytes, and reports a missing configfs-tsm', async () => {
    await expect(collectTsmReport(Buffer.alloc(32), { root: dir })).rejects.toThrow('64 bytes');
    await expect(collectTsmReport(Buffer.alloc(64), { root: join(dir, 'absent') })).rejects.toThrow();
    expect((await stat(dir)).isDirectory()).toBe(true);
  });
});
