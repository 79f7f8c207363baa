/**
 * The orchestration on the multi-service Temporal server on PostgreSQL (docs/design.md, 'Operating
 * it'; devstack/temporalCluster.ts): cards are polled through it; then the history service process
 * is killed (-9) and started again, and polling resumes with no card lost.
 *
 * In `npm run test:cluster` every file runs on this server (TEMPORAL_ADDRESS) and on the Redis
 * Cluster; this one kills and restarts a service of it, so the files after it see a server that
 * was just restarted. Needs the shared PostgreSQL; it brings the Temporal cluster up itself
 * (idempotent, seconds when already running; building the binaries first when they are missing,
 * which takes minutes once per version) and leaves it running.
 */
import './env.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/index.js';
import { isAlive } from '../../devstack/process.js';
import { binariesBuilt, clusterOptions, frontendAddress, servicePid, temporalClusterUp } from '../../devstack/temporalCluster.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';

const CARDS = 6;
const LEASE_MS = 8000;
const OUTAGE_MS = 5000;

test('temporal cluster: cards are polled through it, and polling resumes after the history service is killed and restarted', async (t) => {
  const options = clusterOptions(loadConfig());
  const began = Date.now();
  const phase = (what: string): void => t.diagnostic(`${((Date.now() - began) / 1000).toFixed(1)} s: ${what}`);
  // Never skipped: the binaries are built when missing (minutes, once per version).
  if (!binariesBuilt(options)) phase(`Temporal server ${options.version} not built in ${options.binDir}: building it first (takes minutes)`);
  const up = await temporalClusterUp(options, (line) => t.diagnostic(line));
  phase(
    `cluster up (${Object.entries(up.services)
      .map(([s, how]) => `${s} ${how}`)
      .join(', ')})`,
  );

  // The server this file kills is the one the suite runs on (test:cluster, env.ts).
  assert.equal(loadConfig().TEMPORAL_ADDRESS, frontendAddress(options), 'TEMPORAL_ADDRESS names the local Temporal cluster');
  const stack = await createStack('cluster-temporal');
  try {
    const account = await seedAccount(stack, {
      name: 'cluster1',
      qps: { main: 50 },
      typeGroups: { card_status: 'main', carddata: 'main' },
      cards: CARDS,
      intervalsSec: { card_status: 2, carddata: 4 },
      // A short lease: runs interrupted by the outage are reclaimed in seconds (total ≤ lease).
      carrier: { leaseMs: LEASE_MS, stepTimeoutMs: 2000, totalTimeoutMs: 6000 },
      // Slow calls keep cards inside executions most of the time, so the kill interrupts some.
      simulator: { latencyMs: { p50: 300, p99: 600 } },
    });
    const carrierId = account.carrier.id;
    const workers = await stack.startWorkers();
    const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    await ensurePollingControl(ref, { reconcileEveryMs: 2000 });

    const successesSince = async (since: Date): Promise<Map<string, number>> => {
      const { rows } = await stack.db.pool.query<{ card_id: string; n: string }>(
        "SELECT card_id::text, count(*)::text AS n FROM card_execution WHERE outcome = 'success' AND started_at > $1 GROUP BY card_id",
        [since],
      );
      return new Map(rows.map((r) => [r.card_id, Number(r.n)]));
    };
    await waitFor(
      'two successful executions of every card on the cluster',
      async () => {
        const done = await successesSince(new Date(0));
        return done.size === CARDS && [...done.values()].every((n) => n >= 2);
      },
      90_000,
    );
    phase('every card succeeded twice');

    // kill -9 the history service while cards are inside a gateway call: no graceful shard
    // hand-off, the runs' workflow task completions and timers meet a dead service.
    const inFlight = async (): Promise<string[]> =>
      Object.entries((await stack.simulator.stats()).cards ?? {})
        .filter(([, card]) => card.inflight > 0)
        .map(([iccid]) => iccid);
    const interrupted = await waitFor(
      'at least two cards in a gateway call',
      async () => {
        const cards = await inFlight();
        return cards.length >= 2 ? cards : undefined;
      },
      20_000,
      20,
    );
    const historyPid = servicePid(options, 'history');
    assert.ok(historyPid !== undefined, 'history service pid');
    process.kill(historyPid, 'SIGKILL');
    await waitFor('the history process to die', async () => !isAlive(historyPid), 10_000, 50);
    const killedAt = Date.now();
    phase(`killed history (pid ${historyPid}) with ${interrupted.length} cards in a gateway call`);
    // A few seconds of outage: card runs and scheduler timers stall meanwhile.
    await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));

    const restarted = await temporalClusterUp(options, (line) => t.diagnostic(line));
    // Only the killed service is started again: by this `up`, or by another one on the shared
    // machine (a benchmark bringing the cluster up) during the outage.
    const historyNow = servicePid(options, 'history');
    assert.ok(historyNow !== undefined && historyNow !== historyPid, `a new history process (was ${historyPid}, now ${historyNow})`);
    assert.deepEqual(
      Object.entries(restarted.services)
        .filter(([s, how]) => s !== 'history' && how === 'started')
        .map(([s]) => s),
      [],
      'no other service had to be started again',
    );
    if (restarted.services.history === 'reused') phase(`history had been started again by another process (pid ${historyNow})`);
    const restartedAt = new Date();
    phase(`history started again (pid ${servicePid(options, 'history')}) in ${restartedAt.getTime() - killedAt} ms after the kill`);

    // Polling resumes and no card is lost: every card succeeds again, twice, after the restart.
    const after = await waitFor(
      'two successful executions of every card after the restart',
      async () => {
        const done = await successesSince(restartedAt);
        return done.size === CARDS && [...done.values()].every((n) => n >= 2) ? done : undefined;
      },
      120_000,
    );
    phase('every card succeeded twice after the restart');
    assert.deepEqual([...after.keys()].sort(), account.cards.map((c) => c.id).sort());

    const { rows: outcomes } = await stack.db.pool.query<{ outcome: string; n: string }>(
      'SELECT outcome, count(*)::text AS n FROM card_execution GROUP BY outcome ORDER BY outcome',
    );
    phase(`outcomes: ${outcomes.map((r) => `${r.outcome} ${r.n}`).join(', ')}`);
    const stats = await stack.simulator.stats();
    for (const card of account.cards) {
      const seen = stats.cards?.[card.iccid];
      assert.ok(seen && seen.maxConcurrent <= 1, `card ${card.iccid} had ${seen?.maxConcurrent} concurrent gateway calls`);
      assert.notEqual(await stack.deps.store.laneOf(carrierId, card.id), null, `card ${card.id} fell out of its lane`);
    }
    assert.equal(stats.accounts['cluster1-gw']?.groups.main?.rejected, 0);
    // No run of this stack failed or timed out across the outage (visibility on PostgreSQL).
    const broken = await stack.client.workflow.count(
      `WorkflowId STARTS_WITH "${stack.config.WORKFLOW_ID_PREFIX}" AND ExecutionStatus IN ("Failed", "TimedOut")`,
    );
    assert.equal(broken.count, 0, 'failed or timed-out runs');
    await workers.stop();
  } finally {
    await stack.close();
  }
});
