/**
 * The dashboard in a real headless Chromium (Debian's `chromium`, driven by playwright-core) against
 * a real API server on a test stack: token prompt, a row per account, numbers and charts moving as
 * checks run, the card search and detail, a request-check from the page that shows up among the
 * card's executions, and the mode switch. One screenshot per page view under
 * test-results/screenshots/.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { buildApiServer } from '../../src/api/server.js';
import { getPollingMode } from '../../src/db/systemConfig.js';
import { workflowListUrl } from '../../src/dashboard/temporalLinks.js';
import { ensurePollingControl, type OrchestrationRef } from '../../src/app/temporalControl.js';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';

/** Installed by scripts/ensure-chromium.sh. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SCREENSHOTS = new URL('../../test-results/screenshots/', import.meta.url);
const WAIT_MS = 30_000;
/** The wait for the first checks after the workers start: the loops' start-up on a loaded machine. */
const START_WAIT_MS = 120_000;

async function launch(): Promise<Browser> {
  try {
    // Root in CI and containers: Chromium's sandbox needs user namespaces it may not have.
    return await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  } catch (error) {
    throw new Error(`cannot start ${CHROMIUM} (run scripts/ensure-chromium.sh): ${error instanceof Error ? error.message : String(error)}`);
  }
}

async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: new URL(`${name}.png`, SCREENSHOTS).pathname, fullPage: true });
}

/** Text of `[data-field=field]` in the row of one account. */
async function rowField(page: Page, carrierId: string, field: string): Promise<string> {
  return (await page.locator(`article.account[data-carrier-id="${carrierId}"] [data-field="${field}"]`).first().textContent()) ?? '';
}

test('dashboard in Chromium: accounts live, card detail, request-check, mode switch', async () => {
  const stack = await createStack('dashboard-browser');
  const ref: OrchestrationRef = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
  const app = await buildApiServer({ config: stack.config, deps: stack.deps, services: stack.services, orchestration: ref }, { logLevel: 'silent' });
  let browser: Browser | undefined;
  try {
    await app.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const typeGroups = { card_status: 'main', carddata: 'main' } as const;
    const accounts = [
      await seedAccount(stack, { name: 'dash1', qps: { main: 20 }, typeGroups, cards: 20, intervalsSec: { card_status: 3, carddata: 6 } }),
      await seedAccount(stack, { name: 'dash2', qps: { main: 10 }, typeGroups, cards: 10, intervalsSec: { card_status: 4 } }),
      await seedAccount(stack, {
        name: 'dash3',
        qps: { status: 6, usage: 3 },
        typeGroups: { card_status: 'status', carddata: 'usage' },
        cards: 10,
        intervalsSec: { card_status: 5, carddata: 10 },
      }),
    ];
    const [first] = accounts;
    const card = first!.cards[0]!;

    browser = await launch();
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    page.setDefaultTimeout(WAIT_MS);
    const pageErrors: string[] = [];
    page.on('pageerror', (error) => pageErrors.push(error.message));
    // CSP violations and script errors reach the console as errors; a refused token is expected below.
    page.on('console', (message) => {
      if (message.type() === 'error' && !message.text().includes('401')) pageErrors.push(message.text());
    });
    // The mode switch asks for confirmation.
    page.on('dialog', (dialog) => void dialog.accept());

    // `/` leads to the dashboard, which asks for the token once; a wrong one is refused.
    await page.goto(`${base}/`);
    assert.equal(new URL(page.url()).pathname, '/dashboard');
    await page.locator('#token-input').waitFor({ state: 'visible' });
    await page.fill('#token-input', 'not-the-token');
    await page.click('#token-form button[type="submit"]');
    await page.locator('#token-error', { hasText: 'refused' }).waitFor();
    await screenshot(page, 'dashboard-token');
    await page.fill('#token-input', stack.config.API_TOKEN);
    await page.click('#token-form button[type="submit"]');

    // A row per seeded account, before anything runs: idle numbers, no scheduler.
    for (const { carrier, cards } of accounts) {
      const row = page.locator(`article.account[data-carrier-id="${carrier.id}"]`);
      await row.locator('[data-field="lanes"]').waitFor();
      assert.equal(await row.locator('h3').textContent(), carrier.name);
      assert.equal(await rowField(page, carrier.id, 'lanes'), `0 / ${cards.length}`);
      assert.equal(await rowField(page, carrier.id, 'callsPerSec'), '0');
      assert.equal(await rowField(page, carrier.id, 'scheduler'), 'scheduler not running');
      assert.equal(await rowField(page, carrier.id, 'staleness'), '–', 'no change dated yet');
    }
    assert.equal(await page.locator('article.account').count(), accounts.length);
    assert.equal(await page.locator(`article.account[data-carrier-id="${accounts[2]!.carrier.id}"] tr[data-group]`).count(), 2, 'a budget row per group');
    assert.equal(await page.locator('#mode').textContent(), 'carrier');
    // The token survives a reload: it is asked for once.
    await page.reload();
    await page.locator(`article.account[data-carrier-id="${first!.carrier.id}"]`).waitFor();
    assert.equal(await page.locator('#token-panel').isHidden(), true);

    // Checks run: the numbers move, the scheduler shows up, the charts fill.
    await stack.startWorkers();
    await ensurePollingControl(ref, { reconcileEveryMs: 2000 });
    const firstRow = `article.account[data-carrier-id="${first!.carrier.id}"]`;
    // Each seen at some refresh, not necessarily the same one: calls/s counts the last second's
    // grants only, and 10 cards on 5 s intervals leave seconds without any. Bounded for a start-up
    // beside a busy loop per core (CI run 51 here: not both within 30 s).
    const seen = { calls: false, running: false };
    await waitFor(
      'calls/s above 0 and the scheduler running on the page',
      async () => {
        seen.calls ||= Number(await rowField(page, first!.carrier.id, 'callsPerSec')) > 0;
        seen.running ||= (await rowField(page, first!.carrier.id, 'scheduler')) === 'running';
        return seen.calls && seen.running;
      },
      START_WAIT_MS,
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}: seen ${JSON.stringify(seen)}`);
    });
    assert.match(await rowField(page, first!.carrier.id, 'limitedBy'), /^limited by: (none|budget|inflight|orchestration)$/);
    // Lateness comes from finished executions, a moment after the first calls.
    await waitFor('lateness measured', async () => (await rowField(page, first!.carrier.id, 'lateness')) !== '0 ms / 0 ms', WAIT_MS);
    await waitFor(
      'two samples in the budget chart',
      async () => Number(await page.locator(`${firstRow} [data-chart="budget"] path[data-series="main used"]`).getAttribute('data-points')) >= 2,
      WAIT_MS,
    );
    assert.equal(await page.locator(`${firstRow} [data-chart]`).count(), 3, 'budget, lateness and queue charts');
    await screenshot(page, 'dashboard-accounts');

    // Card search by ICCID: detail, Web UI link, executions with outcome and gateway latency.
    await page.fill('#card-query', card.iccid);
    await page.click('#card-search-form button[type="submit"]');
    await page.locator('#card-summary', { hasText: `card ${card.id}` }).waitFor();
    const workflowId = `${stack.config.WORKFLOW_ID_PREFIX}card-${card.id}`;
    assert.equal(
      await page.locator('#temporal-link').getAttribute('href'),
      workflowListUrl(stack.config.TEMPORAL_UI_URL, stack.config.TEMPORAL_NAMESPACE, workflowId),
    );
    await page.locator('#executions tbody tr[data-outcome="success"]').first().waitFor();
    assert.match((await page.locator('#executions tbody tr').first().locator('td').nth(3).textContent()) ?? '', /^\d+ ms$/);
    assert.ok((await page.locator('[data-section="due"] tr[data-type="card_status"]').count()) === 1, 'due time of card_status');
    assert.equal(await page.locator('#executions tbody tr[data-lane="priority"]').count(), 0);

    // A request-check from the page goes through the API and shows up as a priority-lane run.
    await page.uncheck('#request-check-form input[value="card_status"]');
    await page.check('#request-check-form input[value="carddata"]');
    await page.click('#request-check-form button[type="submit"]');
    await page.locator('#request-check-result', { hasText: 'requested: 1 type(s) (carddata: requested)' }).waitFor();
    await page.locator('#executions tbody tr[data-lane="priority"]').first().waitFor();
    const priorityRun = page.locator('#executions tbody tr[data-lane="priority"]').first();
    assert.match((await priorityRun.locator('td').nth(1).textContent()) ?? '', /carddata/);
    assert.match((await priorityRun.locator('a').getAttribute('href')) ?? '', new RegExp(`/workflows/${workflowId}/[0-9a-f-]+/history$`));
    await screenshot(page, 'dashboard-card');

    // Mode switch through the API with the token, confirmed in a dialog.
    assert.equal(await page.locator('#mode-switch').textContent(), 'Switch to legacy');
    await page.click('#mode-switch');
    await page.locator('#mode-result', { hasText: 'switched to legacy' }).waitFor();
    assert.equal(await page.locator('#mode').textContent(), 'legacy');
    assert.equal((await getPollingMode(stack.deps.pool)).mode, 'legacy');

    assert.deepEqual(pageErrors, []);
  } finally {
    // Page first, then the API (waits for its sampling round), then the stack, whose close ends
    // the workflows while the workers still answer the status queries in flight, then the workers.
    await browser?.close();
    await app.close();
    await stack.close();
  }
});
