import { createHash } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
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

/**
 * Capture sets in a real browser against a real `svc serve`: a site, an epoch, then two files picked
 * in the page, hashed there, uploaded through tus with progress, and completed to `ready`.
 */
describe.skipIf(!HAVE_CHROMIUM)('capture sets in the dashboard', { timeout: 120_000 }, () => {
  let stack: Stack;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    [stack, browser] = await Promise.all([startStack(), launchBrowser()]);
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(45_000);
    page = await context.newPage();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('creates a site and an epoch, uploads a small set through tus and sees it reach ready', async () => {
    await page.goto(`${stack.base}/signup`);
    await page.getByLabel('Email').fill(`capture-${Date.now()}@dashboard.test`);
    await page.getByLabel('Password').fill('a dashboard passphrase');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('button', { name: 'Continue to the dashboard' }).click();
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Capture', exact: true }).click();
    await page.getByRole('heading', { name: 'Capture', level: 1 }).waitFor();

    await page.getByLabel('Site name').fill('Harbour crane');
    await page.getByLabel('Country (optional)').fill('ca');
    await page.getByRole('button', { name: 'Create site' }).click();
    await page.getByRole('heading', { name: 'Site Harbour crane', level: 1 }).waitFor();
    await page.getByLabel('Epoch label').fill('2026-Q4');
    await page.getByRole('button', { name: 'Create epoch' }).click();
    await page.getByRole('heading', { name: 'Epoch 2026-Q4 of Harbour crane', level: 1 }).waitFor();
    expect(await unlabelledControls(page)).toEqual([]);

    const photo = Buffer.alloc(3 * 1024 * 1024, 7);
    const notes = Buffer.from('north side, low tide\n');
    await page.getByLabel('Files').setInputFiles([
      { name: 'crane.jpg', mimeType: 'image/jpeg', buffer: photo },
      { name: 'notes.txt', mimeType: 'text/plain', buffer: notes },
    ]);
    await page.getByRole('button', { name: 'Create and upload' }).click();
    const done = page.getByTestId('capture-done');
    await done.waitFor();
    const message = (await done.textContent()) ?? '';
    expect(message).toMatch(/^Capture set cs_[0-9a-z]{26}: ready$/);
    expect(await page.getByLabel('Upload of crane.jpg').getAttribute('value')).toBe(String(photo.length));
    await screenshot(page, 'capture-ready');

    // What the page computed and sent is what the server verified.
    const id = message.slice('Capture set '.length, message.indexOf(':'));
    const token = await inPage<string>(page, "JSON.parse(sessionStorage.getItem('svc.session') ?? '{}').token ?? ''");
    const res = await fetch(`${stack.base}/api/v1/capture-sets/${id}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const body = (await res.json()) as {
      capture_set: { status: string };
      files: { path: string; sha256: string; bytes_received: number; verification: string }[];
    };
    expect(body.capture_set.status).toBe('ready');
    expect(body.files).toEqual([
      expect.objectContaining({
        path: 'crane.jpg',
        sha256: createHash('sha256').update(photo).digest('hex'),
        bytes_received: photo.length,
        verification: 'verified',
      }),
      expect.objectContaining({
        path: 'notes.txt',
        sha256: createHash('sha256').update(notes).digest('hex'),
        bytes_received: notes.length,
        verification: 'verified',
      }),
    ]);
    await page.getByTestId('capture-sets').getByText('ready').waitFor();
  });
});
