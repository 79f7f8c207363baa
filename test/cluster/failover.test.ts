/**
 * A Redis Cluster master killed with SIGKILL while cards are claimed and executing: its replica is
 * promoted, the same connection keeps working (other masters' accounts at once, the victim's once
 * the failover is done), claims made before the kill still finish, and no card is lost from the
 * lanes. Replication is asynchronous: writes acknowledged by the master but not yet by its replica
 * die with it, so the writes before the kill are confirmed with WAIT 1 (a production deployment
 * accepts that window, at most the replication lag; the rebuild from PostgreSQL repairs lanes).
 *
 * Needs the local cluster of `scripts/services.ts up --cluster` (it kills a process it started);
 * restarts the killed node at the end, which rejoins as a replica.
 */
import './env.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../src/config/index.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { isCluster, masterNodes, nodeAddress } from '../../src/redis/connection.js';
import { keySlot } from '../../src/redis/slot.js';
import { dataDir } from '../../devstack/paths.js';
import { allNodesHealthy, CLUSTER_HOST, CLUSTER_PORTS, clusterInfo, clusterNodePid, isHealthy, restartClusterNode } from '../../devstack/redisCluster.js';
import { waitUntil } from '../../devstack/process.js';
import { createTestRedis } from '../../testkit/redis.js';

const ACCOUNTS = Array.from({ length: 24 }, (_, i) => String(i + 1));
const CARDS = Array.from({ length: 20 }, (_, i) => `k${i}`);
const LEASE_MS = 600_000;
const PER_ROUND = 5;
const FAILOVER_LIMIT_MS = 60_000;

interface Claim {
  readonly carrierId: string;
  readonly cardId: string;
  readonly token: string;
}

test('a master killed -9: replica promoted, the connection keeps working, claims finish, no card lost', async (t) => {
  const root = join(dataDir(loadConfig().DATA_DIR), 'redis-cluster');
  const scratch = await createTestRedis('cluster-failover');
  const { redis, namespace } = scratch;
  let victimPort: number | undefined;
  try {
    assert.ok(isCluster(redis), 'runs on the cluster');
    const store = new CarrierQueueStore(redis, namespace);
    const now = Date.now();
    await store.upsertMany(ACCOUNTS.flatMap((carrierId) => CARDS.map((cardId) => ({ carrierId, cardId, now, dues: { card_status: now - 1 } }))));

    // The victim: the master serving account 1; the accounts it holds and the others.
    const ownerOf = (carrierId: string): string => redis.slots[keySlot(store.keys(carrierId).queue)]?.[0] ?? '?';
    const victimAddress = ownerOf('1');
    const victim = masterNodes(redis).find((node) => nodeAddress(node) === victimAddress);
    assert.ok(victim, `master ${victimAddress} found`);
    victimPort = Number(victimAddress.split(':')[1]);
    const pid = clusterNodePid(root, victimPort);
    const serverPid = Number(/process_id:(\d+)/.exec(await victim.info('server'))?.[1]);
    if (pid === undefined || pid !== serverPid) {
      t.skip(`node ${victimAddress} was not started by this project (pid file in ${root}): cannot kill it`);
      victimPort = undefined;
      return;
    }
    const onVictim = ACCOUNTS.filter((carrierId) => ownerOf(carrierId) === victimAddress);
    const elsewhere = ACCOUNTS.filter((carrierId) => ownerOf(carrierId) !== victimAddress);
    assert.ok(onVictim.length > 0 && elsewhere.length > 0);

    // Cards in flight at the kill: claimed and executing on every account.
    const round = async (carrierId: string, prefix: string, at: number): Promise<Claim[]> => {
      const { claimed } = await store.claim({
        carrierId,
        now: at,
        leaseMs: LEASE_MS,
        inflightLimit: 100,
        priorityRatio: 0,
        tokenPrefix: prefix,
        groupBudget: { g: PER_ROUND },
        typeGroups: { card_status: 'g' },
        countRealname: false,
      });
      return claimed.map((card) => ({ carrierId, cardId: card.cardId, token: card.token }));
    };
    const before = (await Promise.all(ACCOUNTS.map((carrierId) => round(carrierId, `pre${carrierId}`, now)))).flat();
    assert.equal(before.length, ACCOUNTS.length * PER_ROUND);
    for (const claim of before) assert.equal(await store.acquireExec(claim.carrierId, claim.cardId, claim.token, 'run', LEASE_MS, now), 'acquired');
    // Everything written so far is on the victim's replica too (WAIT counts this connection's writes).
    assert.ok((await victim.wait(1, 5000)) >= 1, 'the replica acknowledged the writes');

    process.kill(pid, 'SIGKILL');
    const killedAt = Date.now();
    t.diagnostic(`killed master ${victimAddress} (pid ${pid}); ${onVictim.length} of ${ACCOUNTS.length} accounts on it`);

    // The other masters' accounts are served throughout (cluster-require-full-coverage no).
    const other = elsewhere[0]!;
    const during = await round(other, `during${other}`, now + 1);
    assert.equal(during.length, PER_ROUND, 'an account on another master claims during the failover');
    t.diagnostic(`account ${other} on another master claimed ${Date.now() - killedAt} ms after the kill`);

    // The victim's accounts come back once the replica is promoted: retry until a round succeeds.
    let after: Claim[] = [];
    let failures = 0;
    for (;;) {
      try {
        after = await round('1', 'post1', now + 2);
        break;
      } catch (error) {
        failures += 1;
        if (Date.now() - killedAt > FAILOVER_LIMIT_MS)
          throw new Error(`no claim on the victim's slots ${FAILOVER_LIMIT_MS} ms after the kill`, { cause: error });
        await sleep(200);
      }
    }
    const resumedMs = Date.now() - killedAt;
    assert.equal(after.length, PER_ROUND, 'the next round claims on the promoted replica');
    const survivors = CLUSTER_PORTS.filter((port) => port !== victimPort);
    await waitUntil(
      'cluster state ok without the killed master',
      async () => isHealthy(await clusterInfo(CLUSTER_HOST, survivors[0]!), CLUSTER_PORTS.length - 1),
      FAILOVER_LIMIT_MS,
    );
    const promoted = ownerOf('1');
    assert.notEqual(promoted, victimAddress, 'account 1 is served by another node now');
    t.diagnostic(`victim's slots answered again after ${resumedMs} ms (${failures} failed attempts); now served by ${promoted}`);

    // Claims made before the kill still hold: each one finishes as its owner.
    for (const claim of [...before, ...during, ...after]) {
      const owned = await store.finish({
        carrierId: claim.carrierId,
        cardId: claim.cardId,
        token: claim.token,
        now: now + 3,
        set: { 'ok:card_status': now + 3, 'due:card_status': now + 3_600_000 },
        del: [],
      });
      assert.equal(owned, true, `${claim.token} finished as owner`);
    }

    // No card lost: each account's cards are all in its lanes, and all claimable once due.
    for (const carrierId of ACCOUNTS) {
      const keys = store.keys(carrierId);
      const prio: string[] = await redis.zrange(keys.prio, 0, -1);
      const queue: string[] = await redis.zrange(keys.queue, 0, -1);
      assert.deepEqual([...prio, ...queue].sort(), [...CARDS].sort(), `account ${carrierId} lanes`);
      const { claimed } = await store.claim({
        carrierId,
        now: now + 7_200_000,
        leaseMs: LEASE_MS,
        inflightLimit: 100,
        priorityRatio: 0,
        tokenPrefix: `end${carrierId}`,
        typeGroups: {},
        countRealname: false,
      });
      assert.equal(claimed.length, CARDS.length, `account ${carrierId}: every card claimable`);
    }
  } finally {
    if (victimPort !== undefined) {
      // Back to 3 masters + 3 replicas for whoever runs next: the old master rejoins as a replica.
      await restartClusterNode(root, victimPort, (line) => t.diagnostic(line));
      await waitUntil('the restarted node back in a healthy cluster', () => allNodesHealthy(CLUSTER_HOST, CLUSTER_PORTS), FAILOVER_LIMIT_MS);
    }
    await scratch.close();
  }
});
