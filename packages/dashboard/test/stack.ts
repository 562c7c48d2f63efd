import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { spawnSvc, waitForUrl, type SpawnedSvc } from '@svc/cli/testing';
import { startOpenAITestServer, type OpenAITestServer } from '@svc/node-agent/testing';
import { createTestStore, type TestStore } from '@svc/server/testing';
import { DASHBOARD_RUN_ENV } from './global-setup.js';

const DASHBOARD_ROOT = fileURLToPath(new URL('..', import.meta.url));
/** Screenshots for review land here (repository root, ignored by git). */
export const SCREENSHOT_DIR = fileURLToPath(new URL('../../../test-results/dashboard/', import.meta.url));

/** Debian's Chromium (`apt-get install chromium`), or SVC_CHROMIUM. */
export const CHROMIUM = process.env.SVC_CHROMIUM ?? '/usr/bin/chromium';
export const HAVE_CHROMIUM = existsSync(CHROMIUM);

/**
 * The flags this environment's docs give for a headless Chromium as root on a machine without
 * outside network: no sandbox, no GPU, and no background calls home that would be refused.
 */
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}

/**
 * The dashboard built from the current sources, once per test run: the first browser test file
 * that asks builds it (a Vite build, 3 to 5 s of CPU) in the run's directory (global-setup.ts),
 * the others wait for that build and share it, so no test sees a build older than its run. The
 * directory is read only for the tests; the global setup removes it.
 *
 * @example
 * const dashboardDir = await dashboardBuild();
 * spawnSvc(['serve'], { SVC_DASHBOARD_DIR: dashboardDir });
 */
export async function dashboardBuild(): Promise<string> {
  const runDir = process.env[DASHBOARD_RUN_ENV];
  if (!runDir) throw new Error(`${DASHBOARD_RUN_ENV} is not set: run the browser tests with vitest.config.ts`);
  const outDir = join(runDir, 'dist');
  const building = join(runDir, 'building');
  const failed = join(runDir, 'failed');
  try {
    // Taken once per run, by the file that builds.
    mkdirSync(join(runDir, 'taken'));
  } catch {
    // Another test file is building it, or has built it.
    return until(
      "another test file's dashboard build",
      () =>
        existsSync(outDir)
          ? outDir
          : existsSync(failed)
            ? Promise.reject(new Error(readFileSync(failed, 'utf8')))
            : undefined,
      180_000,
    );
  }
  const r = spawnSync(
    process.execPath,
    [join(DASHBOARD_ROOT, '../../node_modules/vite/bin/vite.js'), 'build', '--outDir', building, '--emptyOutDir'],
    { cwd: DASHBOARD_ROOT, encoding: 'utf8' },
  );
  if (r.status !== 0) {
    const error = `dashboard build failed:\n${r.stdout}\n${r.stderr}`;
    writeFileSync(failed, error);
    throw new Error(error);
  }
  // Whole or absent: the waiting files see the directory only once the build has finished.
  renameSync(building, outDir);
  return outDir;
}

async function until<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface Stack {
  base: string;
  /** The build the server serves (this run's, shared: read only). */
  dashboardDir: string;
  upstream: OpenAITestServer;
  server: SpawnedSvc;
  /** Starts a real `svc node` process with an operator key, serving the test upstream's models; resolves with its node id. */
  startNode(operatorKey: string): Promise<string>;
  stop(): Promise<void>;
}

/**
 * A real `svc serve` process on a fresh store, serving a dashboard built from the sources, and an
 * OpenAI-compatible test upstream for the node started later with `startNode`.
 */
export async function startStack(): Promise<Stack> {
  const store: TestStore = await createTestStore();
  const dashboardDir = await dashboardBuild();
  const upstream = await startOpenAITestServer({ streamDelayMs: 40 });
  const server = spawnSvc(['serve', '--port', '0'], {
    SVC_DATA_DIR: store.dataDir,
    SVC_DASHBOARD_DIR: dashboardDir,
    SVC_LOG_LEVEL: 'warn',
    SVC_RATE_LIMIT_BURST: '100000',
    SVC_ORG_RATE_LIMIT_BURST: '100000',
    SVC_ANON_RATE_LIMIT_BURST: '100000',
    ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
  });
  const base = await waitForUrl(server);
  const nodes: { proc: SpawnedSvc; dir: string }[] = [];
  return {
    base,
    dashboardDir,
    upstream,
    server,
    async startNode(operatorKey) {
      const dir = mkdtempSync(join(tmpdir(), 'svc-dashboard-node-'));
      const proc = spawnSvc(
        [
          'node',
          '--server',
          base,
          '--data-dir',
          dir,
          '--country',
          'CA',
          '--region',
          'ca-central',
          '--upstream',
          upstream.url,
          '--model',
          'tinyllama',
          '--model',
          'phi-4',
          '--name',
          'browser-test-node',
        ],
        { SVC_NODE_API_KEY: operatorKey },
      );
      nodes.push({ proc, dir });
      return until(
        'node registration',
        () =>
          /registered (node_[a-z0-9]+)/.exec(proc.stdout())?.[1] ??
          (proc.child.exitCode !== null ? Promise.reject(new Error(proc.stderr())) : undefined),
      );
    },
    async stop() {
      for (const n of nodes) {
        n.proc.child.kill('SIGKILL');
        await n.proc.exited;
        rmSync(n.dir, { recursive: true, force: true });
      }
      server.child.kill('SIGTERM');
      await server.exited;
      await upstream.close();
      await store.drop();
    },
  };
}

/** Saves a full-page screenshot under test-results/dashboard/ for review. */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}

/** Evaluates a JavaScript expression in the page (browser code, kept as text: this is Node code). */
export function inPage<T = unknown>(page: Page, expression: string): Promise<T> {
  return page.evaluate(expression) as Promise<T>;
}

/**
 * Form controls on the page that have no accessible name: every input, select and textarea
 * needs a label (or aria-label). Returns their descriptions, empty when all are labelled.
 */
export function unlabelledControls(page: Page): Promise<string[]> {
  return inPage<string[]>(
    page,
    `[...document.querySelectorAll('input, select, textarea')]
       .filter((el) => el.type !== 'hidden')
       .filter((el) => !(el.labels?.length > 0 || el.getAttribute('aria-label') || el.getAttribute('aria-labelledby')))
       .map((el) => el.outerHTML.slice(0, 120))`,
  );
}
