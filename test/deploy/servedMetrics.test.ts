/**
 * The Grafana dashboard and the Prometheus alert rules read only metrics the processes serve: a
 * running stack (the workers of all four kinds in one process, as `npm run workers` runs them, and
 * the API) checks a few cards, then every metric name in the dashboard's expressions and in the
 * rules' expressions must be in what their `/metrics` endpoints answer — the project's own
 * metrics and the Temporal SDK's, which the workers serve merged into theirs.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { switchIngestMode } from '../../src/ingest/mode.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { createStack, stackEnv, type Stack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { sharedBundleEnv } from '../../testkit/workflowBundle.js';
import { freePort, isRunning, spawnEntryProcess, waitUntilPrinted, type EntryProcess } from '../faults/entryProcess.js';
import { servedLabels, servedNames } from '../ops/promqlNames.js';
import { dashboardExpressions, labelsMissing, namesMissing, ruleExpressions } from '../ops/deployExpressions.js';

const START_LIMIT_MS = 180_000;

let stack: Stack | undefined;
const processes: EntryProcess[] = [];
let served = new Set<string>();
const labels = new Map<string, Set<string>>();
let loopFailures: string[] = [];
let carrierId = '';

async function scrape(url: string): Promise<string> {
  const response = await fetch(url);
  assert.equal(response.status, 200, `${url} answered ${response.status}`);
  return response.text();
}

before(async () => {
  stack = await createStack('ops-served-metrics');
  const running = stack;
  // Records go through the ingest stream: the ingest's metrics see them.
  await switchIngestMode(running.db.pool, 'async', 'test');
  const account = await seedAccount(running, {
    name: 'metrics1',
    qps: { main: 20 },
    typeGroups: { card_status: 'main', carddata: 'main' },
    cards: 3,
    intervalsSec: { card_status: 1, carddata: 1 },
    // Some calls fail (retried by Temporal): the SDK serves its activity-failure counter from the first.
    simulator: { errorRate: 0.2 },
  });
  await ensurePollingControl(
    { client: running.client, taskQueues: running.taskQueues, workflowIdPrefix: running.config.WORKFLOW_ID_PREFIX },
    { reconcileEveryMs: 2000 },
  );
  const env = { ...process.env, ...stackEnv(running), ...(await sharedBundleEnv()), LOG_LEVEL: 'warn' };
  const workers = spawnEntryProcess('workers', 'src/workers/all.ts', { ...env, GATEWAY_STEPS: 'queue', WORKER_METRICS_PORT: '0' });
  const apiPort = await freePort();
  const api = spawnEntryProcess('API', 'src/api/main.ts', { ...env, API_HOST: '127.0.0.1', API_PORT: String(apiPort) });
  processes.push(workers, api);
  await waitUntilPrinted(workers, 'workers running', START_LIMIT_MS);
  await waitUntilPrinted(api, 'card-poller API on', START_LIMIT_MS);
  const workerMetrics = /metrics (http:\/\/[^\s/]+\/metrics)/.exec(workers.output())?.[1];
  assert.ok(workerMetrics, `the workers printed their metrics URL:\n${workers.output()}`);
  // A few checks of every card, their records committed by the ingest.
  await waitFor(
    'every card checked twice and recorded',
    async () => {
      const { rows } = await running.db.pool.query<{ n: string }>(
        'SELECT count(*)::text AS n FROM (SELECT card_id FROM card_execution GROUP BY card_id HAVING count(*) >= 2) AS checked',
      );
      return Number(rows[0]?.n) === account.cards.length;
    },
    120_000,
  );
  // A control loop's failure counter exists once a loop failed: the account's claim rounds fail
  // while the table they read the polling mode from is away (renamed in this test's own schema).
  await running.db.pool.query('ALTER TABLE system_config RENAME TO system_config_away');
  try {
    loopFailures = await waitFor(
      "the scheduler's failed claim rounds counted",
      async () => {
        const lines = (await scrape(workerMetrics)).split('\n').filter((line) => line.startsWith('cardpoller_loop_activity_failures'));
        return lines.length > 0 ? lines : undefined;
      },
      60_000,
    );
  } finally {
    await running.db.pool.query('ALTER TABLE system_config_away RENAME TO system_config');
  }
  // The SDK serves its local-activity failure counter from the first failure. The failed claim
  // rounds above are local activities only in the workflow loop: with SCHEDULER_LOOP=activity they
  // run inside the claim loop's lap (docs/design.md, 'The claim loop as an activity') and no run
  // starts while they fail. A card run's bookkeeping (local activities, in either loop) fails
  // while the card table is away (renamed in this test's own schema).
  await running.db.pool.query('ALTER TABLE iot_card RENAME TO iot_card_away');
  try {
    await waitFor(
      'a failed local activity counted',
      async () => /^temporal_local_activity_execution_failed\{/m.test(await scrape(workerMetrics)) || undefined,
      60_000,
    );
  } finally {
    await running.db.pool.query('ALTER TABLE iot_card_away RENAME TO iot_card');
  }
  carrierId = account.carrier.id;
  // The API's requests (this scrape included) are in its own metrics.
  const texts = [await scrape(workerMetrics), await scrape(`http://127.0.0.1:${apiPort}/metrics`)];
  served = new Set(texts.flatMap((text) => [...servedNames(text)]));
  for (const text of texts) {
    for (const [name, names] of servedLabels(text)) labels.set(name, new Set([...(labels.get(name) ?? []), ...names]));
  }
  if (process.env.SERVED_METRICS_DUMP) (await import('node:fs')).writeFileSync(process.env.SERVED_METRICS_DUMP, texts.join('\n'));
});

after(async () => {
  for (const entry of processes) {
    if (!isRunning(entry)) continue;
    entry.child.kill('SIGTERM');
    await entry.exited;
  }
  await stack?.close();
});

test('the stack serves its own and the Temporal SDK metrics', () => {
  assert.ok(served.has('cardpoller_checks_total'), 'the workers serve the project metrics');
  assert.ok(served.has('cardpoller_http_request_duration_seconds_bucket'), 'the API serves its request metrics');
  assert.ok(
    [...served].some((name) => name.startsWith('temporal_')),
    'the workers serve the Temporal SDK metrics',
  );
});

test("a control loop's failures are counted per loop, account and activity", () => {
  const scheduler = loopFailures.find((line) => line.includes('loop="carrierScheduler"'));
  assert.ok(scheduler, `a carrierScheduler failure is counted:\n${loopFailures.join('\n')}`);
  assert.match(scheduler, new RegExp(`[{,]carrier="${carrierId}"[,}]`), `the account is in a label named for what it holds: ${scheduler}`);
  assert.match(scheduler, /[{,]activity="claimRound"[,}]/);
  assert.doesNotMatch(scheduler, /[{,]key=/);
});

test('every metric name in the Grafana dashboard is served', () => {
  const missing = namesMissing(dashboardExpressions(), served);
  assert.deepEqual(missing, [], `dashboard expressions read metrics nobody serves:\n${missing.join('\n')}`);
});

test('every metric name in the alert rules is served', () => {
  const missing = namesMissing(ruleExpressions(), served);
  assert.deepEqual(missing, [], `alert rules read metrics nobody serves:\n${missing.join('\n')}`);
});

test('every label matcher in the dashboard and the rules names a label its metric carries', () => {
  const missing = labelsMissing([...dashboardExpressions(), ...ruleExpressions()], labels);
  assert.deepEqual(missing, [], `label matchers on labels the metrics do not have:\n${missing.join('\n')}`);
});
