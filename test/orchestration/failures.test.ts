import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { dueHorizon } from '../../src/activities/control.js';

const LEASE_MS = 8000;

interface AlertRow {
  status: string;
  fail_count: number;
  last_error: string | null;
  first_failed_at: Date | null;
}

test('gateway failures back off, open one alert per card and type after the threshold, and recover on success', async () => {
  const stack = await createStack('orch-failures');
  try {
    const account = await seedAccount(stack, {
      name: 'fail1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main' },
      cards: 2,
      // A long interval: every retry here comes from the backoff, not the schedule.
      intervalsSec: { card_status: 60 },
      // An 8 s lease keeps a claim's due horizon (how early a run may start) at 2 s, below the
      // backoff this test tells apart from the 1 s tick.
      carrier: { failureAlertThreshold: 3, backoffBaseMs: 4000, leaseMs: LEASE_MS, totalTimeoutMs: LEASE_MS - 2000 },
      // Every call answers a transient carrier error until the test heals the account.
      simulator: { errorRate: 1 },
    });
    const [card] = account.cards;
    assert.ok(card);
    await stack.startWorkers();
    await ensurePollingControl(
      { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX },
      { reconcileEveryMs: 2000 },
    );

    const alert = await waitFor(
      'a failure alert',
      async () => {
        const { rows } = await stack.db.pool.query<AlertRow>(
          `SELECT status, fail_count, last_error, first_failed_at FROM polling_failure_alert WHERE card_id = $1::bigint AND check_type = 'card_status'`,
          [card.id],
        );
        return rows.length > 0 ? rows : undefined;
      },
      90_000,
    );
    assert.equal(alert.length, 1, 'one alert per card and type');
    assert.equal(alert[0]?.status, 'open');
    assert.ok((alert[0]?.fail_count ?? 0) >= 3, `opened at the threshold, fail_count ${alert[0]?.fail_count}`);
    assert.match(alert[0]?.last_error ?? '', /^transient\|/);

    const failing = await stack.deps.store.readDue(account.carrier.id, card.id);
    assert.ok(failing && failing.types.card_status.fail >= 3);
    assert.ok(failing.types.card_status.ffail !== null && failing.types.card_status.err?.startsWith('transient|'));
    // Backoff: base 4 s doubling, jittered in [raw/2, raw]: the k-th retry is due at least
    // 2 s × 2^(k-1) after the previous try failed, which is after that try started. A round claims
    // a card up to its due horizon early, so the retry's run may start that much before it is due
    // (a loop without backoff retries every 1 s tick).
    const horizonMs = dueHorizon(Number.POSITIVE_INFINITY, LEASE_MS, 60_000);
    const { rows: tries } = await stack.db.pool.query<{ at: Date }>(
      `SELECT started_at AS at FROM card_execution WHERE card_id = $1::bigint AND outcome = 'failed' ORDER BY started_at`,
      [card.id],
    );
    assert.ok(tries.length >= 3, `${tries.length} failed tries`);
    // The alert knows when the streak began: the first failed try (its finish, within the run).
    const firstFailedAt = alert[0]?.first_failed_at?.getTime() ?? 0;
    const firstTry = tries[0]?.at.getTime() ?? 0;
    assert.ok(firstFailedAt >= firstTry && firstFailedAt < (tries[1]?.at.getTime() ?? Infinity), `first_failed_at ${firstFailedAt} vs first try ${firstTry}`);
    for (let k = 1; k < Math.min(tries.length, 4); k += 1) {
      const gapMs = (tries[k]?.at.getTime() ?? 0) - (tries[k - 1]?.at.getTime() ?? 0);
      assert.ok(gapMs >= 2000 * 2 ** (k - 1) - horizonMs, `retry ${k} came ${gapMs} ms after the previous try (due horizon ${horizonMs} ms)`);
    }
    assert.ok((failing.types.card_status.due ?? 0) > (failing.types.card_status.ffail ?? 0));

    // (That further failures refresh the open alert instead of opening more is
    // test/db/alerts.test.ts, on the records' own terms: it took a 3 s sleep here, which no
    // failure was sure to fall in.)

    await stack.simulator.updateAccount('fail1-gw', { errorRate: 0 });
    await waitFor(
      'alert recovered',
      async () => {
        const { rows } = await stack.db.pool.query<AlertRow>(`SELECT status, fail_count, last_error FROM polling_failure_alert WHERE card_id = $1::bigint`, [
          card.id,
        ]);
        return rows[0]?.status === 'recovered';
      },
      60_000,
    );
    const healed = await stack.deps.store.readDue(account.carrier.id, card.id);
    assert.equal(healed?.types.card_status.fail, 0);
    assert.equal(healed?.types.card_status.err, null);
    assert.ok(healed?.types.card_status.ok !== null);
  } finally {
    await stack.close();
  }
});
