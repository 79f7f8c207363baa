/**
 * Staleness end to end (docs/design.md, 'Freshness'): the simulator changes cards by themselves and
 * dates each change in its answers; the product records each change once, learned at the first
 * observation that carried it, GET /v1/carriers/:id/status reads the percentiles and the workers'
 * metrics observe each change once (cardpoller_staleness_seconds). The two
 * sides count the same changes from the same instants: the simulator's ground truth (change →
 * first answer carrying it) and the product's (changedAt → that answer's observedAt) must agree
 * exactly once every change was learned and recorded.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, stackApi } from '../../testkit/orchestration.js';
import { seedAccount, waitFor, waitForEveryCardObserved } from '../../testkit/seed.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { stalenessByType } from '../../src/db/cardChanges.js';

const CARDS = 20;
const INTERVAL_SEC = 4;
/** An hour's rate that changes about two of the 20 cards a second while drift is on. */
const CHANGES_PER_HOUR = 360;
const DRIFT_MS = 12_000;

test('staleness: every change the simulator dated is learned once by the product, with the simulator’s own figures', async (t) => {
  const stack = await createStack('orch-staleness');
  try {
    const account = await seedAccount(stack, {
      name: 'stale1',
      qps: { main: 50 },
      typeGroups: { card_status: 'main' },
      cards: CARDS,
      intervalsSec: { card_status: INTERVAL_SEC },
    });
    const gateway = 'stale1-gw';
    await stack.startWorkers();
    await ensurePollingControl(
      { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX },
      { reconcileEveryMs: 2000 },
    );
    // Every card seen once first: from then on a dated state is a change, not a first sight.
    await waitForEveryCardObserved(stack, account);
    await stack.simulator.updateAccount(gateway, { changeRatePerHour: { card_status: CHANGES_PER_HOUR } });
    await new Promise((resolve) => setTimeout(resolve, DRIFT_MS));
    await stack.simulator.updateAccount(gateway, { changeRatePerHour: {} });

    // Drift off: every change is learned by the next check of its card, then recorded.
    const truth = await waitFor(
      'every change learned by the product',
      async () => {
        const sim = (await stack.simulator.stats({ cards: false })).accounts[gateway]?.freshness?.card_status;
        if (sim === undefined || sim.pending > 0) return undefined;
        const product = (await stalenessByType(stack.db.pool, account.carrier.id, 3_600_000)).card_status;
        return product?.changes === sim.learned ? { sim, product } : undefined;
      },
      60_000,
      500,
    );
    t.diagnostic(`simulator: ${JSON.stringify(truth.sim)}; product: ${JSON.stringify(truth.product)}`);
    assert.ok(truth.sim.learned >= 5, `changes learned: ${truth.sim.learned}`);
    assert.equal(truth.product.maxMs, truth.sim.stalenessMs?.max, 'the longest staleness, as both sides measured it');

    // The same count in the staleness histogram the workers observed (/metrics), once per change.
    const histogram = (await stack.deps.registry.getSingleMetric('cardpoller_staleness_seconds')?.get()) as
      { values: { metricName?: string; labels: Record<string, string | number>; value: number }[] } | undefined;
    const observed = histogram?.values.find(
      (v) => v.metricName === 'cardpoller_staleness_seconds_count' && v.labels.carrier === account.carrier.id && v.labels.type === 'card_status',
    )?.value;
    assert.equal(observed, truth.sim.learned, 'cardpoller_staleness_seconds observed once per change');

    const app = await stackApi(stack);
    try {
      const res = await app.inject({
        method: 'GET',
        url: `/v1/carriers/${account.carrier.id}/status`,
        headers: { authorization: `Bearer ${stack.config.API_TOKEN}` },
      });
      assert.equal(res.statusCode, 200, res.body);
      const status = res.json<{ staleness: Record<string, { changes: number; maxMs: number }> }>();
      assert.deepEqual(Object.keys(status.staleness), ['card_status']);
      assert.equal(status.staleness.card_status?.changes, truth.sim.learned);
      assert.equal(status.staleness.card_status?.maxMs, truth.sim.stalenessMs?.max);
    } finally {
      await app.close();
    }
  } finally {
    await stack.close();
  }
});
