import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { MAX_DUE_HORIZON_MS } from '../../src/activities/control.js';

/**
 * Steady state: two accounts polled on short intervals. Sized to what one 2-core machine running
 * Temporal's dev server sustains alongside the suite (CARDS per account, env-overridable); the
 * benchmark, not this test, measures how far it goes.
 */
const CARDS = Number(process.env.STEADY_CARDS ?? 40);
const INTERVAL_SEC = Number(process.env.STEADY_INTERVAL_SEC ?? 12);
const OBSERVE_MS = Number(process.env.STEADY_OBSERVE_MS ?? 40_000);

test(`steady state: 2 accounts × ${CARDS} cards every ${INTERVAL_SEC} s are all checked on schedule within budget`, async (t) => {
  const stack = await createStack('orch-steady');
  try {
    const budgets = { s1: 8, s2: 12 };
    const accounts = [
      await seedAccount(stack, {
        name: 's1',
        qps: { status: budgets.s1 },
        typeGroups: { card_status: 'status' },
        cards: CARDS,
        intervalsSec: { card_status: INTERVAL_SEC },
      }),
      await seedAccount(stack, {
        name: 's2',
        qps: { status: budgets.s2 },
        typeGroups: { card_status: 'status' },
        cards: CARDS,
        intervalsSec: { card_status: INTERVAL_SEC },
      }),
    ];
    await stack.startWorkers();
    await ensurePollingControl(
      { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX },
      { reconcileEveryMs: 2000 },
    );
    // Warm-up: the first round of every card (they start within max(interval/10, 2 s)).
    await new Promise((r) => setTimeout(r, INTERVAL_SEC * 1000));
    const from = new Date();
    await new Promise((r) => setTimeout(r, OBSERVE_MS));
    const to = new Date();

    const { rows } = await stack.db.pool.query<{ card_id: string; n: string; late_p99: number }>(
      `SELECT card_id::text, count(*)::text AS n,
              percentile_cont(0.99) WITHIN GROUP (ORDER BY (details->>'latenessMs')::double precision) AS late_p99
         FROM card_execution WHERE started_at >= $1 AND started_at < $2 AND outcome = 'success' GROUP BY card_id`,
      [from, to],
    );
    const counts = new Map(rows.map((r) => [r.card_id, Number(r.n)]));
    // Each card is due every INTERVAL_SEC: in the window it must have run at least that many times,
    // less one for the window's edges.
    const expected = Math.floor(OBSERVE_MS / 1000 / INTERVAL_SEC) - 1;
    // …and at most as often as its due times allow: one run per due time in the window, a claim
    // taking a card at most the due horizon early. More would be over-polling — a decision of the
    // scheduler and the scripts, not of the CPU (a slow machine makes fewer runs, never more).
    const allowed = Math.floor((OBSERVE_MS + MAX_DUE_HORIZON_MS) / 1000 / INTERVAL_SEC) + 1;
    for (const account of accounts) {
      for (const card of account.cards) {
        const n = counts.get(card.id) ?? 0;
        assert.ok(n >= expected, `card ${card.id} of ${account.carrier.name} ran ${n} times, expected ≥ ${expected}`);
        assert.ok(n <= allowed, `card ${card.id} of ${account.carrier.name} ran ${n} times in ${OBSERVE_MS} ms: over-polled (≤ ${allowed} due)`);
      }
    }
    // Lateness by count: no run started a whole interval after its due time (a period missed).
    const { rows: missed } = await stack.db.pool.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM card_execution
        WHERE started_at >= $1 AND started_at < $2 AND (details->>'latenessMs')::double precision >= $3`,
      [from, to, INTERVAL_SEC * 1000],
    );
    assert.equal(Number(missed[0]?.n), 0, 'runs a whole interval late');
    // Every run was a scheduled one: no request-check in this test, so none from the priority lane.
    const { rows: odd } = await stack.db.pool.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM card_execution WHERE started_at >= $1 AND started_at < $2 AND from_priority`,
      [from, to],
    );
    assert.equal(Number(odd[0]?.n), 0, 'priority runs without a request');
    const { rows: lateness } = await stack.db.pool.query<{ p50: number; p99: number; n: string }>(
      `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY (details->>'latenessMs')::double precision) AS p50,
              percentile_cont(0.99) WITHIN GROUP (ORDER BY (details->>'latenessMs')::double precision) AS p99, count(*)::text AS n
         FROM card_execution WHERE started_at >= $1 AND started_at < $2`,
      [from, to],
    );
    t.diagnostic(
      `executions ${lateness[0]?.n} in ${OBSERVE_MS} ms; lateness p50 ${Math.round(lateness[0]?.p50 ?? 0)} ms p99 ${Math.round(lateness[0]?.p99 ?? 0)} ms`,
    );

    const stats = await stack.simulator.stats();
    for (const [name, qps] of Object.entries(budgets)) {
      const group = stats.accounts[`${name}-gw`]?.groups.status;
      assert.ok(group, `simulator saw account ${name}`);
      assert.equal(group.rejected, 0, `${name}: calls rejected as over the limit`);
      assert.ok(group.maxPerSecond <= qps, `${name}: ${group.maxPerSecond} calls in one second > budget ${qps}`);
    }
    for (const [iccid, card] of Object.entries(stats.cards ?? {})) assert.ok(card.maxConcurrent <= 1, `card ${iccid} ran concurrently`);
  } finally {
    await stack.close();
  }
});
