import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHROMIUM,
  HAVE_CHROMIUM,
  inPage,
  launchBrowser,
  screenshot,
  startStack,
  unlabelledControls,
  type Stack,
} from './stack.js';

// npm test: one store: the subject is the dashboard's pages in Chromium; the API they read runs on
// both stores in packages/server's tests.

if (!HAVE_CHROMIUM)
  process.stdout.write(
    `[svc test] SKIPPED the dashboard browser tests: no Chromium at ${CHROMIUM} (apt-get install chromium)\n`,
  );

/**
 * The dashboard end to end: a real `svc serve` process, a real `svc node` process (its engine an
 * OpenAI-compatible test upstream), and Debian's Chromium driven by playwright-core. The tests run
 * in order and share one account, as a person would use the product.
 */
// Generous limits: in CI this file shares two cores with the rest of the suite.
describe.skipIf(!HAVE_CHROMIUM)(
  'the dashboard in a real browser against svc serve and svc node',
  { timeout: 90_000 },
  () => {
    let stack: Stack;
    let browser: Browser;
    let context: BrowserContext;
    let page: Page;
    const email = `owner-${Date.now()}@dashboard.test`;
    const password = 'a dashboard passphrase';
    const state: { firstKey?: string; nodeId?: string; orgName?: string; jobId?: string } = {};

    const api = async (path: string, init: { key?: string; body?: unknown; method?: string } = {}) => {
      const res = await fetch(`${stack.base}${path}`, {
        method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
        headers: {
          ...(init.key ? { authorization: `Bearer ${init.key}` } : {}),
          ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
      });
      const text = await res.text();
      return {
        status: res.status,
        body: (text.startsWith('{') ? JSON.parse(text) : {}) as Record<string, unknown>,
        text,
      };
    };
    const nav = async (label: string) => {
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: label, exact: true }).click();
      await page.getByRole('heading', { level: 1 }).waitFor();
    };
    const expectLabelled = async () => expect(await unlabelledControls(page)).toEqual([]);

    beforeAll(async () => {
      [stack, browser] = await Promise.all([startStack(), launchBrowser()]);
      context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      // Below the test's own time-out, so a failure names the element it waited for.
      context.setDefaultTimeout(45_000);
      page = await context.newPage();
    }, 120_000);

    afterAll(async () => {
      await browser?.close();
      await stack?.stop();
    });

    it('is small and self-contained: no URL outside the server, under 100 KB of gzipped code', async () => {
      const html = readFileSync(join(stack.dashboardDir, 'index.html'), 'utf8');
      const assets = readdirSync(join(stack.dashboardDir, 'assets')).map((name) =>
        readFileSync(join(stack.dashboardDir, 'assets', name)),
      );
      for (const text of [html, ...assets.map((a) => a.toString('utf8'))])
        expect(text).not.toMatch(/(src|href)=["']?(https?:)?\/\//);
      const gzipped = assets.reduce((sum, a) => sum + gzipSync(a).length, 0);
      expect(gzipped).toBeLessThan(100 * 1024);
    });

    it('serves the app at / and signs a new buyer up, showing the first API key once', async () => {
      await page.goto(`${stack.base}/`);
      await page.getByRole('heading', { name: 'Log in' }).waitFor();
      await screenshot(page, '01-login');
      await page.getByRole('link', { name: 'Sign up' }).click();
      await page.getByLabel('Name (optional)').fill('Dana Owner');
      await page.getByLabel('Email').fill(email);
      await page.getByLabel('Password').fill(password);
      await expectLabelled();
      await page.getByRole('button', { name: 'Create account' }).click();
      await page.getByRole('heading', { name: 'Your account is ready' }).waitFor();
      state.firstKey = (await page.getByTestId('first-key').locator('code').textContent()) ?? '';
      expect(state.firstKey).toMatch(/^svc_live_[a-z0-9]{20}_/);
      await page.getByRole('button', { name: 'Continue to the dashboard' }).click();
      await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
      // The session token lives in sessionStorage, never in the address bar.
      expect(page.url()).toBe(`${stack.base}/`);
      expect(await inPage<string[]>(page, 'Object.keys(sessionStorage)')).toEqual(['svc.session']);
      await page.getByTestId('balance').getByText('CA$5.00').first().waitFor();
      const me = await api('/api/v1/auth/me', { key: state.firstKey });
      state.orgName = (me.body.organization as { name: string }).name;
    });

    it('creates a key with a label and scopes, the key works, is revoked in the UI with a reason and is refused at once', async () => {
      await nav('API keys');
      await page.getByLabel('Label').fill('ci pipeline');
      await page.getByRole('checkbox', { name: /read-only/ }).check();
      await expectLabelled();
      await page.getByRole('button', { name: 'Create key' }).click();
      const key = (await page.getByTestId('new-key').locator('code').textContent()) ?? '';
      expect(key).toMatch(/^svc_live_[a-z0-9]{20}_[A-Za-z0-9_-]+$/);
      const prefix = key.split('_').slice(0, 3).join('_');
      await screenshot(page, '03-keys-created');

      // Used like curl would: the key works against the API.
      const used = await api('/api/v1/billing/balance', { key });
      expect(used.status).toBe(200);
      await page.getByRole('button', { name: 'I have copied it' }).click();
      await page.reload();
      const row = page.locator(`tr[data-key-prefix="${prefix}"]`);
      await row.getByText('buyer, read-only').waitFor();
      await expect.poll(async () => row.locator('td').nth(4).textContent()).not.toBe('never');

      await row.getByRole('button', { name: `Revoke ${prefix}` }).click();
      await row.getByLabel(`Reason for revoking ${prefix}`).fill('leaked in a log');
      await row.getByRole('button', { name: 'Revoke now' }).click();
      await page
        .getByRole('status')
        .filter({ hasText: `Key ${prefix} revoked` })
        .waitFor();
      await row.getByText('leaked in a log').waitFor();
      await screenshot(page, '04-keys-revoked');

      const refused = await api('/api/v1/billing/balance', { key });
      expect(refused.status).toBe(401);
      expect(refused.body.error).toBe('unauthorized');
    });

    it('creates an operator key in the UI; a real svc node started with it shows on the Nodes page with the start command', async () => {
      await nav('API keys');
      await page.getByLabel('Label').fill('my node');
      await page.getByRole('checkbox', { name: /^buyer/ }).uncheck();
      await page.getByRole('checkbox', { name: /operator/ }).check();
      await page.getByRole('button', { name: 'Create key' }).click();
      const operatorKey = (await page.getByTestId('new-key').locator('code').textContent()) ?? '';
      state.nodeId = await stack.startNode(operatorKey);

      await nav('Nodes');
      const row = page.locator(`tr[data-node="${state.nodeId}"]`);
      await row.waitFor();
      expect(await row.textContent()).toContain('CA');
      await row.getByText('online').first().waitFor();
      expect(await row.textContent()).toContain('tinyllama');
      // The install commands GET /api/v1/downloads lists: the signed tarball this server serves, then svc node.
      const command = (await page.getByTestId('start-command').textContent()) ?? '';
      const { version } = (await (await fetch(`${stack.base}/api/v1/downloads`)).json()) as { version: string };
      expect(command).toContain(`npm install -g ${stack.base}/api/v1/downloads/svc-${version}.tgz `);
      expect(command).toContain(`\nsvc node --server ${stack.base} `);
      expect(await page.textContent('body')).not.toContain('checkout of SVC');
      await screenshot(page, '07-nodes');
    });

    it('invites a member; a second browser accepts from the accept_url and sees the organization; the owner changes the role and removes them', async () => {
      await nav('Organization');
      const invitee = `member-${Date.now()}@dashboard.test`;
      await page.getByLabel('Email').fill(invitee);
      await page.getByLabel('Role', { exact: true }).selectOption('member');
      await expectLabelled();
      await page.getByRole('button', { name: 'Create invite' }).click();
      const acceptUrl = (await page.getByTestId('accept-url').textContent()) ?? '';
      expect(acceptUrl).toMatch(new RegExp(`^${stack.base}/invite\\?token=`));
      await screenshot(page, '05-organization-invite');

      const second = await browser.newContext({ viewport: { width: 390, height: 844 } });
      const other = await second.newPage();
      await other.goto(acceptUrl);
      await other.getByRole('heading', { name: 'Accept an invite' }).waitFor();
      expect(other.url()).toBe(`${stack.base}/invite`); // the one-use token left the address bar
      await other.getByLabel('Name (optional)').fill('Max Member');
      await other.getByLabel('Password').fill('member passphrase 1');
      await screenshot(other, '02-invite-accept-phone');
      await other.getByRole('button', { name: 'Join the organization' }).click();
      await other.getByRole('heading', { name: 'Organization', level: 1 }).waitFor();
      await other
        .getByText(`${state.orgName}: credits, jobs and keys belong to the organization. You are a member.`)
        .waitFor();
      await other.locator(`tr[data-member="${email}"]`).waitFor();
      await other.locator(`tr[data-member="${invitee}"]`).waitFor();
      expect(await other.getByRole('button', { name: 'Create invite' }).count()).toBe(0); // members do not invite
      await screenshot(other, '06-organization-member-phone');
      await second.close();

      await page.reload();
      const row = page.locator(`tr[data-member="${invitee}"]`);
      await row.getByLabel(`Role of ${invitee}`).selectOption('admin');
      await row.getByRole('button', { name: 'Save role' }).click();
      await page
        .getByRole('status')
        .filter({ hasText: `${invitee} is now admin.` })
        .waitFor();
      const members = await api('/api/v1/organizations/current/members', { key: state.firstKey });
      expect((members.body.members as { email: string; role: string }[]).find((m) => m.email === invitee)?.role).toBe(
        'admin',
      );

      await page
        .locator(`tr[data-member="${invitee}"]`)
        .getByRole('button', { name: `Remove ${invitee}…` })
        .click();
      await page
        .locator(`tr[data-member="${invitee}"]`)
        .getByRole('button', { name: `Remove ${invitee}` })
        .click();
      await page
        .getByRole('status')
        .filter({ hasText: `${invitee} was removed` })
        .waitFor();
      await expect.poll(async () => page.locator(`tr[data-member="${invitee}"]`).count()).toBe(0);
    });

    it('shows a job submitted through the API: the list filter, its status timeline and its signed receipt', async () => {
      const submit = await api('/api/v1/marketplace/jobs', {
        key: state.firstKey,
        body: {
          kind: 1,
          budget: 0.5,
          max_price_per_unit: 0.01,
          currency: 'CAD',
          model: 'tinyllama',
          inline_text: 'what is a receipt?\nwho signs it?',
          strict_jurisdiction: 'CA',
        },
      });
      expect(submit.status).toBe(201);
      state.jobId = String(submit.body.job_id);
      await nav('Jobs');
      await page.getByRole('radio', { name: 'completed' }).check();
      expect(page.url()).toBe(`${stack.base}/jobs?status=completed`);
      const link = page.getByRole('link', { name: new RegExp(state.jobId.slice(0, 8)) });
      await link.waitFor({ timeout: 60_000 });
      await screenshot(page, '08-jobs');
      await link.click();
      await page.getByTestId('timeline').locator('[data-event="job_completed"]').waitFor({ timeout: 60_000 });
      const events = await page
        .getByTestId('timeline')
        .locator('li')
        .evaluateAll((items) => items.map((li) => li.getAttribute('data-event')));
      expect(events).toEqual(expect.arrayContaining(['job_submitted', 'job_assigned', 'job_completed']));
      expect(events.indexOf('job_submitted')).toBeLessThan(events.indexOf('job_completed'));
      const receipts = page.getByTestId('receipts');
      await receipts.getByText(String(state.nodeId)).waitFor();
      await receipts.getByText('SVC1').waitFor();
      expect(await page.getByTestId('job-summary').textContent()).toContain('completed');
      await screenshot(page, '09-job');
    });

    it("draws the job's evidence graph, downloads its bundle and verifies it in the browser; a tampered bundle fails", async () => {
      const graph = page.getByTestId('evidence-graph');
      await graph.waitFor({ timeout: 60_000 });
      const types = await graph
        .locator('g.node')
        .evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-event-type')));
      expect(types).toEqual(expect.arrayContaining(['job.submitted', 'receipt.verified', 'job.completed']));
      expect(await graph.locator('g.edge').count()).toBeGreaterThanOrEqual(types.length - 1);
      // Each event is a keyboard button that shows its fields and hash.
      await graph.locator('g.node[data-event-type="receipt.verified"]').focus();
      await page.keyboard.press('Enter');
      await page.getByTestId('event-details').getByText('receipt.verified').waitFor();

      await page.getByRole('button', { name: 'Verify in this browser' }).click();
      const verification = page.getByTestId('verification');
      await verification.waitFor();
      expect(await verification.getAttribute('data-ok')).toBe('true');
      const checks = await verification
        .locator('li')
        .evaluateAll((items) => items.map((li) => [li.getAttribute('data-check'), li.getAttribute('data-ok')]));
      expect(checks.map(([name]) => name)).toEqual(
        expect.arrayContaining([
          'bundle_hash',
          'merkle_root',
          'certificate_signature',
          'signer_key',
          'receipts_complete',
        ]),
      );
      expect(checks.some(([name]) => String(name).startsWith('receipt_signature['))).toBe(true);
      // The run's entry in the transparency log, checked here as svc verify checks it.
      expect(checks.filter(([name]) => String(name).startsWith('log'))).toEqual([
        ['log_leaf', 'true'],
        ['log_leaf_hash', 'true'],
        ['log_checkpoint_signature', 'true'],
        ['log_inclusion', 'true'],
      ]);
      expect(checks.every(([, ok]) => ok === 'true')).toBe(true);
      expect(await page.getByTestId('verdict').textContent()).toMatch(
        /^Verified in this browser: all \d+ checks passed/,
      );
      await screenshot(page, '09b-job-evidence-verified');

      const download = page.waitForEvent('download');
      await page.getByRole('button', { name: 'Download bundle' }).click();
      const text = readFileSync(await (await download).path(), 'utf8');
      const bundle = JSON.parse(text) as { type: string; receipts: { metering_units: number }[] };
      expect(bundle.type).toBe('svc.evidence_bundle.v1');

      // Tamper: bill for more units than the node signed for.
      const [receipt] = bundle.receipts;
      if (!receipt) throw new Error('the bundle has no receipt');
      receipt.metering_units += 1000;
      await page.getByTestId('bundle-file').setInputFiles({
        name: 'tampered.json',
        mimeType: 'application/json',
        buffer: Buffer.from(JSON.stringify(bundle)),
      });
      await expect.poll(async () => verification.getAttribute('data-ok')).toBe('false');
      expect(await page.getByTestId('verdict').textContent()).toMatch(
        /^Verification failed: \d+ of \d+ checks failed \(file tampered.json\)/,
      );
      const failed = await verification
        .locator('li[data-ok="false"]')
        .evaluateAll((items) => items.map((li) => li.getAttribute('data-check')));
      expect(failed).toEqual(expect.arrayContaining(['bundle_hash']));
      expect(failed.some((name) => String(name).startsWith('receipt_signature['))).toBe(true);
      await screenshot(page, '09c-job-evidence-tampered');

      // The untouched file verifies the same way as the server's copy.
      await page
        .getByTestId('bundle-file')
        .setInputFiles({ name: 'original.json', mimeType: 'application/json', buffer: Buffer.from(text) });
      await expect.poll(async () => verification.getAttribute('data-ok')).toBe('true');
    });

    it('streams a chat answer in the playground, naming the node, its country and the receipt', async () => {
      await nav('Playground');
      await page.getByLabel('Model').selectOption('tinyllama');
      await page.getByLabel('Country (optional)').fill('CA');
      await page.getByLabel('Message').fill('tell me about signed receipts please');
      await expectLabelled();
      // Count the distinct texts the answer goes through: a streamed answer grows word by word.
      await inPage(
        page,
        `window.seenTexts = new Set();
       new MutationObserver(() => {
         const text = document.querySelector('[data-testid="answer"] .content')?.textContent;
         if (text) window.seenTexts.add(text);
       }).observe(document.body, { subtree: true, childList: true, characterData: true })`,
      );
      const response = page.waitForResponse((r) => r.url().endsWith('/v1/chat/completions'));
      await page.getByRole('button', { name: 'Send' }).click();
      expect((await response).headers()['content-type']).toContain('text/event-stream');
      const answer = page.getByTestId('answer');
      await answer.getByText('You said: tell me about signed receipts please').waitFor();
      await answer.getByTestId('receipt-id').waitFor();
      expect(await answer.getByTestId('served-country').textContent()).toBe('CA');
      expect(await answer.getByTestId('served-by').textContent()).toContain(String(state.nodeId));
      const partials = await inPage<number>(page, 'window.seenTexts.size');
      expect(partials).toBeGreaterThan(3);
      const receiptId = (await answer.getByTestId('receipt-id').textContent()) ?? '';
      expect(receiptId).toMatch(/^rcpt_/);
      await answer.getByText(`Receipt ${receiptId}`).click();
      await answer.getByText('Signed by node key').waitFor();
      await screenshot(page, '10-playground');
    });

    it('shows the overview with the balance, the spend chart, recent jobs and requests, and node health', async () => {
      await nav('Overview');
      await page.getByTestId('requests').getByText('tinyllama').waitFor();
      await page.getByTestId('jobs').getByText('completed').first().waitFor();
      await page.getByTestId('node-health').getByText('1 of 1').waitFor();
      expect(await page.locator('figure.chart svg[role="img"] rect.bar').count()).toBe(14);
      expect(await page.getByTestId('spend-summary').textContent()).toMatch(/spent in the last 14 days/);
      await screenshot(page, '00-overview');
    });

    it('shows billing: balance, free-tier grant, the paged ledger and a CSV export of all of it', async () => {
      await nav('Billing');
      await page.getByTestId('balance').getByText('Free-tier grant').waitFor();
      await page.getByTestId('ledger').getByText('free_tier').waitFor();
      // Money is Canadian dollars, written out: CA$, never a bare $ (which reads as US dollars).
      const balance = (await page.getByTestId('balance').textContent()) ?? '';
      const ledger = (await page.getByTestId('ledger').textContent()) ?? '';
      expect(balance).toContain('Free-tier grantCA$5.00');
      expect(ledger).toContain('+CA$5.00');
      expect(`${balance} ${ledger}`).not.toMatch(/(^|[^A])\$\d/);
      const download = page.waitForEvent('download');
      await page.getByRole('button', { name: 'Export CSV' }).click();
      const file = await download;
      const csv = readFileSync(await file.path(), 'utf8');
      const lines = csv.split('\r\n').filter(Boolean);
      expect(lines[0]).toBe('id,created_at,tx_type,amount_cents,balance_after,description,ref');
      const total = Number((await api('/api/v1/billing/transactions', { key: state.firstKey })).body.total);
      expect(lines).toHaveLength(total + 1);
      expect(csv).toContain(',free_tier,500,');
      await screenshot(page, '11-billing');
    });

    it('shows the SLA against its targets over a chosen window', async () => {
      await nav('SLA');
      await page.getByLabel('Window', { exact: true }).selectOption('168');
      await page.getByRole('heading', { name: 'Assignment latency' }).waitFor();
      await page.getByText(/target ≤ 5.0 s/).waitFor();
      await page.locator('svg.gauge[role="img"]').first().waitFor();
      expect(await page.locator('svg.gauge').first().getAttribute('aria-label')).toMatch(
        /p95 assignment latency: .* against a target of 5.0 s; meets it/,
      );
      await screenshot(page, '12-sla');
    });

    it('works by keyboard and at phone width: skip link, visible focus, a menu button', async () => {
      const phone = await browser.newContext({ viewport: { width: 390, height: 844 } });
      const p = await phone.newPage();
      // Share the session by logging in (tokens are per tab).
      await p.goto(`${stack.base}/billing`);
      await p.getByLabel('Email').fill(email);
      await p.getByLabel('Password').fill(password);
      await p.keyboard.press('Enter');
      await p.getByRole('heading', { name: 'Billing', level: 1 }).waitFor();
      await p.reload(); // a fresh load: focus starts at the top of the document
      await p.getByRole('heading', { name: 'Billing', level: 1 }).waitFor();
      await p.keyboard.press('Tab');
      expect(await inPage<string>(p, 'document.activeElement?.textContent')).toBe('Skip to content');
      const outline = await inPage<string>(p, 'getComputedStyle(document.activeElement).outlineStyle');
      expect(outline).toBe('solid');
      expect(await p.getByRole('navigation', { name: 'Main' }).isVisible()).toBe(false);
      const menu = p.getByRole('button', { name: 'Menu' });
      await menu.focus();
      await p.keyboard.press('Enter');
      expect(await menu.getAttribute('aria-expanded')).toBe('true');
      await p.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Jobs' }).focus();
      await p.keyboard.press('Enter');
      await p.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
      expect(await inPage<string>(p, 'document.activeElement?.tagName')).toBe('H1'); // focus moves to the new page
      await p.getByTestId('jobs').waitFor();
      const width = await inPage<number>(p, 'document.documentElement.scrollWidth');
      expect(width).toBeLessThanOrEqual(390); // nothing overflows sideways
      await screenshot(p, '13-jobs-phone');
      await phone.close();
    });

    it('logs out, refuses the old session, and logs back in', async () => {
      const token = await inPage<string>(page, `JSON.parse(sessionStorage.getItem('svc.session') ?? '{}').token`);
      await page.getByRole('button', { name: 'Log out' }).click();
      await page.getByRole('heading', { name: 'Log in' }).waitFor();
      expect(await inPage<string | null>(page, `sessionStorage.getItem('svc.session')`)).toBeNull();
      expect((await api('/api/v1/auth/me', { key: token })).status).toBe(401);
      await page.getByLabel('Password').fill('wrong password!');
      await page.getByLabel('Email').fill(email);
      await page.getByRole('button', { name: 'Log in' }).click();
      await page
        .getByRole('alert')
        .getByText(/Could not log in/)
        .waitFor();
      await page.getByLabel('Password').fill(password);
      await page.getByRole('button', { name: 'Log in' }).click();
      await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    });
  },
);
