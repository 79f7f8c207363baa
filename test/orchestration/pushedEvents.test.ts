/**
 * Pushed events end to end (docs/design.md, 'Freshness'): the simulator pushes each change of a
 * card, signed with the account's event secret, to POST /v1/events of a listening API; the ingest
 * worker's applier records it. With a 2-minute status interval no scheduled check comes in the
 * window, so every change the product learns it learns from a push: the simulator's count of
 * changes learned (by a 2xx to the push that carried them) and the product's count of changes
 * recorded must agree exactly, each applied event moved its card's next check out, none is left
 * pending or unknown.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, stackApi } from '../../testkit/orchestration.js';
import { seedAccount, waitFor, waitForEveryCardObserved } from '../../testkit/seed.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { stalenessByType } from '../../src/db/cardChanges.js';
import { updateCarrier } from '../../src/db/carriers.js';
import { accountKeys } from '../../src/redis/keys.js';

const CARDS = 20;
/** Long enough that no scheduled check falls in the window (the first checks come within a tenth of it). */
const INTERVAL_SEC = 120;
const CHANGES_PER_HOUR = 360;
const DRIFT_MS = 10_000;
const SECRET = 'pushed-events-test-secret';

test('pushed events: every change the simulator pushes is learned once from its event, and moves the card’s next check out', async (t) => {
  const stack = await createStack('orch-pushed-events');
  const app = await stackApi(stack);
  try {
    const account = await seedAccount(stack, {
      name: 'push1',
      qps: { main: 50 },
      typeGroups: { card_status: 'main' },
      cards: CARDS,
      intervalsSec: { card_status: INTERVAL_SEC },
    });
    await updateCarrier(stack.db.pool, account.carrier.id, { eventSecret: SECRET });
    const gateway = 'push1-gw';
    await stack.startWorkers();
    await ensurePollingControl(
      { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX },
      { reconcileEveryMs: 2000 },
    );
    // Every card checked once first (a new card is due within a tenth of its interval); the next check is 2 minutes away.
    await waitForEveryCardObserved(stack, account);
    const callsBefore = (await stack.simulator.stats({ cards: false })).accounts[gateway]?.groups.main?.calls ?? 0;

    const address = await app.listen({ host: '127.0.0.1', port: 0 });
    const pushing = await fetch(`${stack.simulator.url}/sim/accounts/${gateway}/push`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url: `${address}/v1/events`, secret: SECRET, types: ['card_status'] }),
    });
    assert.equal(pushing.status, 200, await pushing.text());
    await stack.simulator.updateAccount(gateway, { changeRatePerHour: { card_status: CHANGES_PER_HOUR } });
    await new Promise((resolve) => setTimeout(resolve, DRIFT_MS));
    await stack.simulator.updateAccount(gateway, { changeRatePerHour: {} });

    const truth = await waitFor(
      'every pushed change recorded',
      async () => {
        const stats = (await stack.simulator.stats({ cards: false })).accounts[gateway];
        const sim = stats?.freshness?.card_status;
        if (sim === undefined || sim.pending > 0) return undefined;
        const product = (await stalenessByType(stack.db.pool, account.carrier.id, 3_600_000)).card_status;
        return product?.changes === sim.learned ? { sim, product, push: stats?.push } : undefined;
      },
      60_000,
      500,
    );
    t.diagnostic(`simulator: ${JSON.stringify(truth.sim)} push ${JSON.stringify(truth.push)}; product: ${JSON.stringify(truth.product)}`);
    assert.ok(truth.sim.learned >= 5, `changes learned: ${truth.sim.learned}`);
    assert.equal(truth.push?.failed ?? 0, 0);
    assert.equal(truth.push?.dropped ?? 0, 0);
    const callsAfter = (await stack.simulator.stats({ cards: false })).accounts[gateway]?.groups.main?.calls ?? 0;
    assert.equal(callsAfter, callsBefore, 'no check was made in the window: the changes came from the events');

    const { rows: events } = await stack.db.pool.query<{ status: string; n: number }>(
      'SELECT status, count(*)::int AS n FROM carrier_event WHERE carrier_id = $1 GROUP BY status',
      [account.carrier.id],
    );
    assert.deepEqual(events, [{ status: 'applied', n: truth.push?.delivered }], 'every delivered event applied, none pending or unknown');
    // Each card's next status check is at its latest event + the interval.
    const { rows: latest } = await stack.db.pool.query<{ card_id: string; at: Date }>(
      'SELECT card_id::text, max(observed_at) AS at FROM carrier_event WHERE carrier_id = $1 GROUP BY card_id',
      [account.carrier.id],
    );
    const keys = accountKeys(stack.redis.namespace, account.carrier.id);
    for (const { card_id: cardId, at } of latest) {
      const due = Number(await stack.deps.redis.hget(keys.due(cardId), 'due:card_status'));
      assert.equal(due, at.getTime() + INTERVAL_SEC * 1000, `card ${cardId}`);
    }
  } finally {
    await app.close();
    await stack.close();
  }
});
