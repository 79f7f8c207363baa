/**
 * The orchestration through a Redis Cluster failover: cards are polled by the workers (Temporal
 * cluster, PostgreSQL, the Redis Cluster), one master is killed with SIGKILL, and polling
 * resumes on the accounts it served once its replica is promoted — with no card lost from the
 * lanes and no card ever run twice at once (the simulator's per-card concurrency).
 *
 * Needs the local cluster of `scripts/services.ts up --cluster` (it kills a process it started)
 * and restarts the killed node at the end.
 */
import './env.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/index.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { isCluster, masterNodes, nodeAddress } from '../../src/redis/connection.js';
import { accountKeys } from '../../src/redis/keys.js';
import { keySlot } from '../../src/redis/slot.js';
import { dataDir } from '../../devstack/paths.js';
import { waitUntil } from '../../devstack/process.js';
import { allNodesHealthy, CLUSTER_HOST, CLUSTER_PORTS, clusterNodePid, restartClusterNode } from '../../devstack/redisCluster.js';
import { createStack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor, type SeedAccount } from '../../testkit/seed.js';

const ACCOUNTS = 6;
const CARDS = 4;
const RESUME_LIMIT_MS = 60_000;

test('polling through a Redis master kill: the promoted replica takes over, polling resumes, no card lost or run twice at once', async (t) => {
  const began = Date.now();
  const phase = (what: string): void => t.diagnostic(`${((Date.now() - began) / 1000).toFixed(1)} s: ${what}`);
  const root = join(dataDir(loadConfig().DATA_DIR), 'redis-cluster');
  const stack = await createStack('cluster-polling-failover');
  let victimPort: number | undefined;
  try {
    const redis = stack.deps.redis;
    assert.ok(isCluster(redis), 'the workers run on the cluster');
    const accounts: SeedAccount[] = [];
    for (let i = 1; i <= ACCOUNTS; i += 1) {
      accounts.push(
        await seedAccount(stack, { name: `pf${i}`, qps: { main: 20 }, typeGroups: { card_status: 'main' }, cards: CARDS, intervalsSec: { card_status: 2 } }),
      );
    }
    const ownerOf = (carrierId: string): string => redis.slots[keySlot(accountKeys(stack.redis.namespace, carrierId).queue)]?.[0] ?? '?';
    const victimAddress = ownerOf(accounts[0]!.carrier.id);
    const victim = masterNodes(redis).find((node) => nodeAddress(node) === victimAddress);
    assert.ok(victim, `master ${victimAddress} found`);
    const port = Number(victimAddress.split(':')[1]);
    const pid = clusterNodePid(root, port);
    if (pid === undefined || pid !== Number(/process_id:(\d+)/.exec(await victim.info('server'))?.[1])) {
      t.skip(`node ${victimAddress} was not started by this project: cannot kill it`);
      return;
    }
    const onVictim = accounts.filter((account) => ownerOf(account.carrier.id) === victimAddress);

    const workers = await stack.startWorkers();
    await ensurePollingControl(
      { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX },
      { reconcileEveryMs: 2000 },
    );
    const executedSince = async (since: Date, cardIds: readonly string[]): Promise<number> => {
      const { rows } = await stack.db.pool.query<{ n: string }>(
        'SELECT count(DISTINCT card_id)::text AS n FROM card_execution WHERE started_at > $1 AND card_id = ANY($2::bigint[])',
        [since, cardIds],
      );
      return Number(rows[0]?.n ?? 0);
    };
    const allCards = accounts.flatMap((account) => account.cards.map((card) => card.id));
    await waitFor('every card executed once', async () => (await executedSince(new Date(0), allCards)) === allCards.length, 60_000);
    phase(`every card polled; killing master ${victimAddress} (${onVictim.length} of ${ACCOUNTS} accounts on it)`);

    await victim.wait(1, 5000);
    process.kill(pid, 'SIGKILL');
    victimPort = port;
    const killedAt = new Date();

    // Every card of the victim's accounts runs again after the kill: polling resumed there.
    const victimCards = onVictim.flatMap((account) => account.cards.map((card) => card.id));
    await waitFor(
      'every card on the killed master polled again',
      async () => (await executedSince(killedAt, victimCards)) === victimCards.length,
      RESUME_LIMIT_MS,
      500,
    );
    phase(`polling resumed on the promoted replica (${ownerOf(accounts[0]!.carrier.id)}) ${Date.now() - killedAt.getTime()} ms after the kill`);
    await waitFor('every card polled again', async () => (await executedSince(killedAt, allCards)) === allCards.length, RESUME_LIMIT_MS, 500);

    await workers.stop();
    for (const account of accounts) {
      const keys = accountKeys(stack.redis.namespace, account.carrier.id);
      const prio: string[] = await redis.zrange(keys.prio, 0, -1);
      const queue: string[] = await redis.zrange(keys.queue, 0, -1);
      assert.deepEqual(
        [...prio, ...queue].sort(),
        account.cards.map((card) => card.id).sort(),
        `account ${account.carrier.id}: every card in exactly one lane`,
      );
    }
    const cards = (await stack.simulator.stats()).cards ?? {};
    const twice = Object.entries(cards).filter(([, card]) => card.maxConcurrent > 1);
    assert.deepEqual(twice, [], 'no card ran twice at once');
    const { rows: outcomes } = await stack.db.pool.query<{ outcome: string; n: string }>(
      'SELECT outcome, count(*)::text AS n FROM card_execution GROUP BY outcome ORDER BY outcome',
    );
    t.diagnostic(`outcomes: ${outcomes.map((row) => `${row.outcome} ${row.n}`).join(', ')}`);
  } finally {
    if (victimPort !== undefined) {
      await restartClusterNode(root, victimPort, (line) => t.diagnostic(line));
      await waitUntil('the restarted node back in a healthy cluster', () => allNodesHealthy(CLUSTER_HOST, CLUSTER_PORTS), RESUME_LIMIT_MS);
    }
    await stack.close();
  }
});
