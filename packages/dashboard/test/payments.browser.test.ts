import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHROMIUM,
  HAVE_CHROMIUM,
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
    `[svc test] SKIPPED the payments browser tests: no Chromium at ${CHROMIUM} (apt-get install chromium)\n`,
  );

/**
 * Payouts and top-ups through the dashboard, a real `svc serve` and Debian's Chromium, with the
 * offline `local` payment provider: its onboarding and checkout pages are served by svc serve.
 */
describe.skipIf(!HAVE_CHROMIUM)('payments in a real browser (the local provider)', { timeout: 90_000 }, () => {
  let stack: Stack;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    [stack, browser] = await Promise.all([startStack(), launchBrowser()]);
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(45_000);
    page = await context.newPage();
    await page.goto(`${stack.base}/signup`);
    await page.getByLabel('Email').fill(`payer-${Date.now()}@dashboard.test`);
    await page.getByLabel('Password').fill('a dashboard passphrase');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('button', { name: 'Continue to the dashboard' }).click();
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('tops up through the checkout page and shows the credit when it lands', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Billing', exact: true }).click();
    await page.getByTestId('balance').getByText('$5.00').first().waitFor();
    await page.getByLabel('Amount (CAD)').fill('25');
    expect(await unlabelledControls(page)).toEqual([]);
    await page.getByRole('button', { name: 'Top up' }).click();
    await page.getByRole('heading', { name: 'Checkout' }).waitFor();
    expect(await page.getByRole('note').textContent()).toContain('no real money moves');
    expect(await page.textContent('main')).toContain('25.00 CAD');
    await screenshot(page, 'payments-01-checkout');
    await page.getByRole('button', { name: 'Pay' }).click();
    await page.getByRole('heading', { name: 'Billing', level: 1 }).waitFor();
    await page.getByTestId('topup-status').getByText('the credit is on your balance').waitFor();
    await page.getByTestId('balance').getByText('$30.00').first().waitFor();
    expect(await page.getByTestId('no-real-money').isVisible()).toBe(true);
    await page.getByTestId('ledger').getByText('topup').first().waitFor();
    await screenshot(page, 'payments-02-billing');
  });

  it('sets up a payout account and completes onboarding', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Payouts', exact: true }).click();
    await page.getByRole('heading', { name: 'Payouts', level: 1 }).waitFor();
    expect(await page.getByTestId('no-real-money').textContent()).toContain('No real money moves');
    await page.getByLabel('Payout email').fill('operator@dashboard.test');
    await page.getByLabel('Country').fill('ca');
    expect(await unlabelledControls(page)).toEqual([]);
    await page.getByRole('button', { name: 'Set up payouts' }).click();
    await page.getByRole('button', { name: 'Continue onboarding' }).click();
    await page.getByRole('heading', { name: 'Payout onboarding' }).waitFor();
    await page.getByRole('button', { name: 'Complete onboarding' }).click();
    await page.getByRole('heading', { name: 'Payouts', level: 1 }).waitFor();
    await page.getByTestId('payout-account').getByText('onboarded').first().waitFor();
    expect(await page.getByTestId('payable').textContent()).toContain('$0.00');
    await page.getByText('No payouts yet.').waitFor();
    await screenshot(page, 'payments-03-payouts');
  });
});
