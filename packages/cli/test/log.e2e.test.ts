import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkConsistency,
  checkInclusion,
  openNote,
  parseCheckpoint,
  parseNoteVerifierKey,
  type NoteVerifierKey,
} from '@svc/protocol/verify';
import { createTestStore, TEST_STORE_KIND, type TestStore } from '@svc/server/testing';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

const CHECKPOINT_MS = '200';
const HAS_GO = spawnSync('go', ['version']).status === 0;
/** Debian's golang-golang-x-mod-dev installs golang.org/x/mod here, as a GOPATH. */
const GOPATH_DEBIAN = '/usr/share/gocode';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (!address || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** A tiny Go program: the checkpoint, an inclusion proof, a consistency proof and the tree over tiles, by x/mod's own code. */
const GO_CHECK = `package main

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

func get(url string) []byte {
	res, err := http.Get(url)
	if err != nil { panic(err) }
	defer res.Body.Close()
	if res.StatusCode != 200 { panic(fmt.Sprintf("%s: %d", url, res.StatusCode)) }
	b, err := io.ReadAll(res.Body)
	if err != nil { panic(err) }
	return b
}

func hashes(list []string) []tlog.Hash {
	out := make([]tlog.Hash, len(list))
	for i, s := range list {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) != 32 { panic("bad hash") }
		copy(out[i][:], b)
	}
	return out
}

type tiles struct{ base string }

func (t tiles) Height() int { return 8 }
func (t tiles) SaveTiles([]tlog.Tile, [][]byte) {}
func (t tiles) ReadTiles(list []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(list))
	for i, tile := range list { out[i] = get(t.base + "/api/v1/log/" + tile.Path()) }
	return out, nil
}

func main() {
	base, apiKey, runID := os.Args[1], os.Args[2], os.Args[3]
	oldSize, _ := strconv.ParseInt(os.Args[4], 10, 64)
	var keys struct{ Log struct{ VerifierKeys []string \`json:"verifier_keys"\` } \`json:"log"\` }
	if err := json.Unmarshal(get(base+"/api/v1/keys/platform"), &keys); err != nil { panic(err) }
	var verifiers []note.Verifier
	for _, k := range keys.Log.VerifierKeys {
		v, err := note.NewVerifier(k)
		if err != nil { panic(err) }
		verifiers = append(verifiers, v)
	}
	n, err := note.Open(get(base+"/api/v1/log/checkpoint"), note.VerifierList(verifiers...))
	if err != nil { panic(err) }
	// tlog.ParseTree wants the go.sum database's first line; a C2SP checkpoint names its origin there.
	lines := strings.SplitN(n.Text, "\\n", 4)
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || lines[0] != "svc.test/log" { panic("bad checkpoint " + n.Text) }
	tree := tlog.Tree{N: size, Hash: hashes([]string{lines[2]})[0]}
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/log/proof/inclusion?run_id=%s&tree_size=%d", base, runID, tree.N), nil)
	req.Header.Set("authorization", "Bearer "+apiKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 { panic(fmt.Sprint("inclusion ", err, res.StatusCode)) }
	var inc struct {
		LeafIndex int64    \`json:"leaf_index"\`
		LeafHash  string   \`json:"leaf_hash"\`
		Proof     []string \`json:"proof"\`
		Leaf      json.RawMessage \`json:"leaf"\`
	}
	if err := json.NewDecoder(res.Body).Decode(&inc); err != nil { panic(err) }
	var leaf tlog.Hash
	lb, _ := hex.DecodeString(inc.LeafHash)
	copy(leaf[:], lb)
	if err := tlog.CheckRecord(hashes(inc.Proof), tree.N, tree.Hash, inc.LeafIndex, leaf); err != nil { panic(err) }
	var cons struct{ Proof []string \`json:"proof"\` }
	if err := json.Unmarshal(get(fmt.Sprintf("%s/api/v1/log/proof/consistency?from=%d&to=%d", base, oldSize, tree.N)), &cons); err != nil { panic(err) }
	reader := tlog.TileHashReader(tree, tiles{base})
	oldHash, err := tlog.TreeHash(oldSize, reader)
	if err != nil { panic(err) }
	if err := tlog.CheckTree(hashes(cons.Proof), tree.N, tree.Hash, oldSize, oldHash); err != nil { panic(err) }
	fullHash, err := tlog.TreeHash(tree.N, reader)
	if err != nil { panic(err) }
	if fullHash != tree.Hash { panic("tree hash over tiles differs from the checkpoint") }
	fmt.Printf("ok %d %d %s\\n", tree.N, inc.LeafIndex, base64.StdEncoding.EncodeToString(tree.Hash[:]))
}
`;

/**
 * DESIGN.md section 17 with real processes: `kill -9` of the sequencer's holder while runs close,
 * then (PostgreSQL) a second `svc serve` on the same store takes the lease over, or (PGlite) the
 * one process restarted does; no index is lost or repeated, and every checkpoint extends the one
 * before. Then Go's golang.org/x/mod (sumdb/note, sumdb/tlog) checks the running server's
 * checkpoint, an inclusion proof, a consistency proof and the tree over its tiles.
 */
describe('the transparency log across kill -9 of its sequencer, checked by Go', () => {
  let store: TestStore;
  let dir: string;
  const procs: SpawnedSvc[] = [];
  const serve = async (port: number) => {
    const proc = spawnSvc(['serve'], {
      SVC_DATA_DIR: store.dataDir,
      SVC_PORT: String(port),
      SVC_LOG_LEVEL: 'warn',
      SVC_LOG_CHECKPOINT_MS: CHECKPOINT_MS,
      SVC_LOG_ORIGIN: 'svc.test/log',
      SVC_RATE_LIMIT_RPS: '10000',
      SVC_RATE_LIMIT_BURST: '10000',
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    });
    procs.push(proc);
    return { proc, url: await waitForUrl(proc, 90_000) };
  };

  beforeAll(async () => {
    store = await createTestStore();
    dir = mkdtempSync(join(tmpdir(), 'svc-log-e2e-'));
  }, 120_000);
  afterAll(async () => {
    for (const p of procs) p.child.kill('SIGKILL');
    await store?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('numbers every run once across the kill, proves each in, and Go agrees', async () => {
    const first = await serve(await freePort());
    let base = first.url;
    const call = async (method: string, path: string, key?: string, body?: unknown) => {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: {
          ...(body ? { 'content-type': 'application/json' } : {}),
          ...(key ? { authorization: `Bearer ${key}` } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, text: await res.text() };
    };
    const signup = await call('POST', '/api/v1/auth/signup', undefined, {
      email: 'log-e2e@example.test',
      password: 'a long enough password',
    });
    const apiKey = (JSON.parse(signup.text) as { api_key: string }).api_key;
    /** A job submitted and cancelled: its evidence run closes with no node involved. */
    const closeOne = async (): Promise<string | undefined> => {
      const sub = await call('POST', '/api/v1/marketplace/jobs', apiKey, {
        kind: 1,
        budget: 1,
        max_price_per_unit: 0.00001,
        currency: 'CAD',
        model: 'svc-llama-3.2-3b',
        inline_text: 'a prompt',
      });
      if (sub.status !== 201) return undefined;
      const job = (JSON.parse(sub.text) as { job_id: string }).job_id;
      const cancel = await call('POST', `/api/v1/marketplace/jobs/${job}/cancel`, apiKey).catch(() => undefined);
      return cancel?.status === 200 ? job : undefined;
    };
    const keys = async () => {
      const body = JSON.parse((await call('GET', '/api/v1/keys/platform')).text) as {
        log: { verifier_keys: string[] };
      };
      return (await Promise.all(body.log.verifier_keys.map(parseNoteVerifierKey))).filter(
        (k): k is NoteVerifierKey => !('problem' in k),
      );
    };
    const checkpoint = async () => {
      const opened = await openNote((await call('GET', '/api/v1/log/checkpoint')).text, await keys());
      if ('problem' in opened) throw new Error(opened.problem);
      const cp = parseCheckpoint(opened.text);
      if ('problem' in cp) throw new Error(cp.problem);
      return cp;
    };
    const jobs: string[] = [];
    for (let i = 0; i < 8; i++)
      jobs.push(...((await Promise.all([closeOne(), closeOne()])).filter(Boolean) as string[]));
    const before = await until('the first runs in a checkpoint', async () => {
      const cp = await checkpoint();
      return cp.tree_size >= jobs.length ? cp : undefined;
    });

    // On PostgreSQL a second process shares the store; the first (the lease holder: it started
    // alone and signed) is killed while runs close on both.
    const second = TEST_STORE_KIND === 'postgres' ? await serve(await freePort()) : undefined;
    const load = Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let i = 0; i < 6; i++) {
          const job = await closeOne().catch(() => undefined);
          if (job) jobs.push(job);
        }
      }),
    );
    await new Promise((r) => setTimeout(r, 150));
    first.proc.child.kill('SIGKILL');
    await first.proc.exited;
    if (second) base = second.url;
    await load;
    if (!second) base = (await serve(await freePort())).url;
    for (let i = 0; i < 4; i++) {
      const job = await closeOne();
      if (job) jobs.push(job);
    }

    // Every run closed through the API is numbered once, 0..n-1, and proved in.
    const runs = JSON.parse((await call('GET', '/api/v1/evidence?status=completed&limit=200', apiKey)).text) as {
      runs: { id: string; job_id: string }[];
      total: number;
    };
    expect(runs.total).toBeGreaterThanOrEqual(jobs.length);
    const after = await until(
      'every run in a checkpoint',
      async () => {
        const cp = await checkpoint();
        return cp.tree_size >= runs.total ? cp : undefined;
      },
      30_000,
    );
    expect(after.tree_size).toBe(runs.total);
    const indexes: number[] = [];
    for (const run of runs.runs) {
      const body = JSON.parse(
        (await call('GET', `/api/v1/log/proof/inclusion?run_id=${run.id}&tree_size=${after.tree_size}`, apiKey)).text,
      ) as { leaf_index: number; leaf_hash: string; proof: string[] };
      expect(
        await checkInclusion(body.proof, after.tree_size, after.root_hash_b64, body.leaf_index, body.leaf_hash),
      ).toBe(true);
      indexes.push(body.leaf_index);
    }
    expect(indexes.sort((a, b) => a - b)).toEqual(Array.from({ length: runs.total }, (_, i) => i));
    const cons = JSON.parse(
      (await call('GET', `/api/v1/log/proof/consistency?from=${before.tree_size}&to=${after.tree_size}`)).text,
    ) as { proof: string[] };
    expect(
      await checkConsistency(cons.proof, after.tree_size, after.root_hash_b64, before.tree_size, before.root_hash_b64),
    ).toBe(true);

    if (!HAS_GO) {
      console.log(
        '[svc test] SKIPPED the Go check of the log: `go` is not installed (apt install golang-go golang-golang-x-mod-dev)',
      );
      return;
    }
    const prog = join(dir, 'gocheck');
    mkdirSync(prog, { recursive: true });
    writeFileSync(join(prog, 'main.go'), GO_CHECK);
    // GOPATH mode over Debian's golang-golang-x-mod-dev: no module download, no network.
    const go = spawnSync('go', ['run', 'main.go', base, apiKey, runs.runs[0]?.id ?? '', String(before.tree_size)], {
      cwd: prog,
      env: {
        ...process.env,
        GO111MODULE: 'off',
        GOPATH: GOPATH_DEBIAN,
        GOPROXY: 'off',
        GOTOOLCHAIN: 'local',
        GOFLAGS: '',
        GOCACHE: join(dir, 'gocache'),
      },
      encoding: 'utf8',
      timeout: 180_000,
    });
    expect(go.stderr).toBe('');
    const out = go.stdout;
    expect(out.trim()).toMatch(
      new RegExp(`^ok ${after.tree_size} \\d+ ${after.root_hash_b64.replace(/[+/]/g, '\\$&')}$`),
    );
  }, 300_000);
});
