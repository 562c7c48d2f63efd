import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from '@svc/cli/testing';
import { seedRepository, startFakeGitHub, startGitHost, type FakeGitHub, type GitHost } from '@svc/cli/testing/git';
import { createTestStore, type TestStore } from '@svc/server/testing';
import { CHROMIUM, dashboardBuild, HAVE_CHROMIUM, launchBrowser, screenshot } from './stack.js';

// npm test: one store: the subject is the dashboard's pages in Chromium; the API they read runs on
// both stores in packages/server's tests.

if (!HAVE_CHROMIUM)
  process.stdout.write(`[svc test] SKIPPED the work-order dashboard test: no Chromium at ${CHROMIUM}\n`);

const CAPSULE = fileURLToPath(new URL('../../cli/test/fixtures/test-capsule.mjs', import.meta.url));
const TOKEN = `ghp_dashboardToken${Date.now()}`;

/**
 * The work-order pages in a real browser: `svc serve` with a built dashboard, a `svc node` with
 * the test capsule, a token-protected git host and a fake GitHub.
 */
describe.skipIf(!HAVE_CHROMIUM)('work orders in the dashboard', { timeout: 120_000 }, () => {
  let store: TestStore;
  let host: GitHost;
  let github: FakeGitHub;
  let server: SpawnedSvc;
  let node: SpawnedSvc;
  let nodeDir: string;
  let dashboardDir: string;
  let browser: Browser;
  let page: Page;
  let base: string;
  let key: string;
  const orders: { certified?: string; review?: string } = {};
  const email = `wo-${Date.now()}@dashboard.test`;
  const password = 'a dashboard passphrase';

  const api = async (path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return (await res.json()) as Record<string, unknown>;
  };

  beforeAll(async () => {
    store = await createTestStore();
    dashboardDir = await dashboardBuild();
    host = await startGitHost(TOKEN);
    seedRepository(host.root, 'acme/site', {
      'package.json': '{"scripts":{"test":"node test/run.js"}}',
      'test/run.js': '\n',
      'src/app.js': 'export {};\n',
      'README.md': '# site\n',
    });
    github = await startFakeGitHub();
    server = spawnSvc(['serve', '--port', '0'], {
      SVC_DATA_DIR: store.dataDir,
      SVC_DASHBOARD_DIR: dashboardDir,
      SVC_LOG_LEVEL: 'warn',
      SVC_ALLOW_PRIVATE_EGRESS: '1',
      SVC_GITHUB_API_URL: github.url,
      SVC_GITHUB_HOSTS: new URL(host.url).host,
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    });
    base = await waitForUrl(server, 180_000);
    const signup = (await (
      await fetch(`${base}/api/v1/auth/signup`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email, password }),
      })
    ).json()) as { api_key: string; token: string };
    // The owner's session mints the node's operator key (a buyer key may not grant operator).
    key = signup.token;
    const operator = String((await api('/api/v1/auth/api-keys', { label: 'capsule', scopes: ['operator'] })).api_key);
    key = signup.api_key;
    nodeDir = mkdtempSync(join(tmpdir(), 'svc-dash-wo-node-'));
    node = spawnSvc(
      [
        'node',
        '--server',
        base,
        '--data-dir',
        nodeDir,
        '--allow-process-runner',
        '--capsule',
        process.execPath,
        '--capsule-arg',
        CAPSULE,
      ],
      { SVC_NODE_API_KEY: operator },
    );
    await until('node registration', async () => /registered (node_[a-z0-9]+)/.exec(node.stdout())?.[1]);
    const repo = String(
      (await api('/api/v1/work/repositories', { repository_url: `${host.url}/acme/site.git`, repo_host_token: TOKEN }))
        .id,
    );
    const order = async (goal: string) =>
      String(
        (await api('/api/v1/work/orders', { goal, repository_connection_id: repo, policy_preset: 'standard_feature' }))
          .id,
      );
    orders.certified = await order('WRITE src/flags.js export const flags = {};');
    orders.review = await order('WRITE README.md # site, with docs');
    for (const id of [orders.certified, orders.review]) {
      await until(
        `order ${id} settled`,
        async () =>
          ['pr_opened', 'needs_review'].includes(String((await api(`/api/v1/work/orders/${id}`)).status))
            ? true
            : undefined,
        90_000,
      );
    }
    browser = await launchBrowser();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    page.setDefaultTimeout(45_000);
  }, 420_000);

  afterAll(async () => {
    await browser?.close();
    node?.child.kill('SIGKILL');
    server?.child.kill('SIGTERM');
    await Promise.all([node?.exited, server?.exited]);
    await host?.close();
    await github?.close();
    rmSync(nodeDir, { recursive: true, force: true });
    await store?.drop();
  });

  it('lists the orders with their decision and pull request', async () => {
    await page.goto(`${base}/login`);
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'Work orders', exact: true })
      .click();
    const table = page.getByTestId('work-orders');
    await table.waitFor();
    const rows = await table
      .locator('tbody tr')
      .evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent?.trim() ?? '')));
    expect(rows).toHaveLength(2);
    const review = rows.find((r) => r[1]?.startsWith('WRITE README.md'));
    const certified = rows.find((r) => r[1]?.startsWith('WRITE src/flags.js'));
    expect(review?.slice(2, 5)).toEqual(['needs_review', 'needs_review', '1']);
    expect(certified?.slice(2, 5)).toEqual(['pr_opened', 'certified', '1']);
    expect(certified?.[5]).toMatch(/^github\.test\/acme\/site\/pull\/\d+$/);
    await screenshot(page, 'work-orders-list');
  });

  it('shows an order with its reasons, diff and evidence; an owner approves it and its bundle verifies in the browser', async () => {
    await page
      .getByRole('link', { name: String(orders.review).slice(0, 8), exact: false })
      .first()
      .click();
    await page.getByTestId('work-order-status').getByText('needs_review').first().waitFor();
    await page.getByText('outside the allowed paths: README.md', { exact: true }).waitFor();
    expect(await page.getByTestId('work-order-diff').textContent()).toContain('+# site, with docs');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByText('Approved: the branch is pushed and the pull request opened.').waitFor();
    await page.getByTestId('work-order-status').getByText('pr_opened').waitFor();
    expect(github.pulls.map((p) => p.head)).toContain(`svc/${String(orders.review)}`);
    await page.getByRole('button', { name: 'Verify in this browser' }).click();
    const verification = page.getByTestId('verification');
    await verification.waitFor();
    expect(await verification.getAttribute('data-ok')).toBe('true');
    const names = await verification
      .locator('li')
      .evaluateAll((items) => items.map((li) => li.getAttribute('data-check')));
    expect(names).toEqual(
      expect.arrayContaining([
        'work_order',
        'work_order_decision',
        'work_order_approvals',
        'work_order_pr',
        'work_order_receipt',
      ]),
    );
    await screenshot(page, 'work-order-approved');
  });
});
