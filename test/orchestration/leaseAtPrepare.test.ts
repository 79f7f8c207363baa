/**
 * A card's lease runs from its execution's start (prepareExecution), not from its claim (issue 46,
 * item 7): a batch card without a gateway step of its own (package only) renews nowhere else and
 * waits at the batch's gate for the slowest card's steps — bounded by the account's total timeout,
 * which never exceeds the lease — so a run that started late could lose its lease meanwhile and be
 * claimed and run again. Activities called directly over real Redis and PostgreSQL (no Temporal).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, stackCardActivities } from '../../testkit/orchestration.js';
import { seedAccount } from '../../testkit/seed.js';

const LEASE_MS = 20_000;
const START_LAG_MS = 1500;

test('prepareExecution renews the lease: it ends a lease after the execution started, not after the claim', async () => {
  const stack = await createStack('lease-at-prepare');
  try {
    const account = await seedAccount(stack, {
      name: 'prep1',
      qps: { main: 50 },
      typeGroups: { card_status: 'main' },
      cards: 1,
      intervalsSec: { card_status: 600 },
      carrier: { leaseMs: LEASE_MS },
    });
    const carrierId = account.carrier.id;
    const card = account.cards[0]!;
    const { store, redis } = stack.deps;
    await store.upsert({ carrierId, cardId: card.id, dues: { card_status: Date.now() - 1 } });
    const claim = await store.claim({
      carrierId,
      leaseMs: LEASE_MS,
      inflightLimit: 10,
      priorityRatio: 0,
      tokenPrefix: 'prep.1',
      typeGroups: {},
      countRealname: false,
    });
    const token = claim.claimed[0]!.token;
    const claimedExpiry = Number(await redis.zscore(store.keys(carrierId).running, token));
    // The run starts late (a busy engine): the lease from the claim is shorter by this much.
    await new Promise((resolve) => setTimeout(resolve, START_LAG_MS));
    const preparedAt = Date.now();
    const plan = await stackCardActivities(stack).prepareExecution({ carrierId, cardId: card.id, token, executorId: 'run-1', fromPriority: false });
    assert.equal(plan.kind, 'run');
    const expiry = Number(await redis.zscore(store.keys(carrierId).running, token));
    assert.ok(
      expiry >= preparedAt + LEASE_MS - 100,
      `the lease ends ${expiry - preparedAt} ms after the execution started (claim's: ${claimedExpiry - preparedAt} ms)`,
    );
  } finally {
    await stack.close();
  }
});
