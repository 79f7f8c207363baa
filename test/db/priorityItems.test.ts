import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { listAudit } from '../../testkit/dbReads.js';
import { insertCards } from '../../src/db/cards.js';
import {
  claimPriorityItem,
  completePriorityItem,
  failPriorityItem,
  findActivePriorityItem,
  listDuePriorityRetries,
  nextPriorityRetryInMs,
  requestPriorityItem,
} from '../../src/db/priorityItems.js';
import { normaliseCard } from '../../src/domain/cardInput.js';
import { DomainError } from '../../src/domain/errors.js';
import type { PriorityItem } from '../../src/domain/priorityItem.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { iccid, makeCarrier } from './fixtures.js';

let db: TestDb;
let cardIds: string[];
before(async () => {
  db = await createTestDb('priority');
  const carrier = await makeCarrier(db.pool);
  const cards = await insertCards(
    db.pool,
    [1, 2, 3, 4, 5].map((n) => normaliseCard({ iccid: iccid(200 + n), carrierId: carrier.id })),
  );
  cardIds = cards.map((card) => card.id);
});
after(() => db.close());

const snapshot = (value: unknown): Pick<PriorityItem, 'status' | 'attemptCount'> => value as PriorityItem;

test('priority item: create-or-merge unions types, counts triggers, keeps who and from where', async () => {
  const cardId = cardIds[0]!;
  const first = await requestPriorityItem(db.pool, { cardId, types: ['card_status'], actor: 'alice', source: 'api', cooldownMs: 5000 });
  assert.equal(first.merged, false);
  const concurrent = await Promise.allSettled([
    requestPriorityItem(db.pool, { cardId, types: ['realname', 'card_status'], actor: 'billing', source: 'service', cooldownMs: 1000 }),
    requestPriorityItem(db.pool, { cardId, types: ['carddata'], actor: 'bob', source: 'cli' }),
  ]);
  assert.ok(concurrent.every((r) => r.status === 'fulfilled'));
  const item = (await findActivePriorityItem(db.pool, cardId))!;
  assert.equal(item.id, first.item.id);
  assert.equal(item.triggerCount, 3);
  assert.deepEqual(item.types, ['card_status', 'carddata', 'realname']);
  assert.equal(item.cooldownMs, 1000);
  assert.equal(item.firstActor, 'alice');
  assert.equal(item.firstSource, 'api');
  const audit = await listAudit(db.pool, 'polling_priority_item', item.id);
  assert.deepEqual(
    audit.map((a) => a.action),
    ['created', 'merged', 'merged'],
  );
  assert.equal(audit[0]!.before, null);
  assert.equal((audit[1]!.before as PriorityItem).triggerCount, 1);
  assert.equal((audit[1]!.after as PriorityItem).triggerCount, 2);
  await assert.rejects(
    requestPriorityItem(db.pool, { cardId: '987654', types: ['card_status'], actor: 'a', source: 'api' }),
    (error: unknown) => error instanceof DomainError && error.code === 'not_found' && error.field === 'cardId',
  );
  await assert.rejects(
    requestPriorityItem(db.pool, { cardId, types: ['nope' as never], actor: 'a', source: 'api' }),
    (error: unknown) => error instanceof DomainError && error.field === 'types[0]',
  );
});

test('priority item: pending → processing → completed, each transition audited with before/after', async () => {
  const cardId = cardIds[1]!;
  const { item } = await requestPriorityItem(db.pool, { cardId, types: ['card_status'], actor: 'ops', source: 'api' });
  const claim = await claimPriorityItem(db.pool, { cardId, token: 't1', leaseMs: 60_000 });
  assert.equal(claim.status, 'claimed');
  const busy = await claimPriorityItem(db.pool, { cardId, token: 't2', leaseMs: 60_000 });
  assert.equal(busy.status, 'busy');
  assert.equal(await completePriorityItem(db.pool, { itemId: item.id, token: 'wrong' }), null, 'a stale token changes nothing');
  const done = await completePriorityItem(db.pool, { itemId: item.id, token: 't1' });
  assert.equal(done?.status, 'completed');
  assert.equal(done?.result, 'success');
  assert.equal(await findActivePriorityItem(db.pool, cardId), null);
  const audit = await listAudit(db.pool, 'polling_priority_item', item.id);
  assert.deepEqual(
    audit.map((a) => [a.action, snapshot(a.before)?.status ?? null, snapshot(a.after).status]),
    [
      ['created', null, 'pending'],
      ['claimed', 'pending', 'processing'],
      ['completed', 'processing', 'completed'],
    ],
  );
  // A new trigger after completion opens a new active item.
  const next = await requestPriorityItem(db.pool, { cardId, types: ['carddata'], actor: 'ops', source: 'api' });
  assert.notEqual(next.item.id, item.id);
});

test('priority item: retryable failures go back to pending with a next run time until the attempt limit', async () => {
  const cardId = cardIds[2]!;
  const { item } = await requestPriorityItem(db.pool, { cardId, types: ['card_status'], actor: 'ops', source: 'api', attemptLimit: 2 });
  const nextRunAt = new Date(Date.now() + 30_000);
  await claimPriorityItem(db.pool, { cardId, token: 'a1', leaseMs: 60_000 });
  const retry = await failPriorityItem(db.pool, { itemId: item.id, token: 'a1', reason: 'gateway timeout', retryable: true, nextRunAt });
  assert.equal(retry?.status, 'pending');
  assert.equal(retry?.attemptCount, 1);
  assert.equal(retry?.nextRunAt?.getTime(), nextRunAt.getTime());
  await claimPriorityItem(db.pool, { cardId, token: 'a2', leaseMs: 60_000 });
  const final = await failPriorityItem(db.pool, { itemId: item.id, token: 'a2', reason: 'gateway timeout', retryable: true });
  assert.equal(final?.status, 'failed');
  assert.equal(final?.attemptCount, 2);
  assert.match(final?.failureReason ?? '', /attempt limit/);
  const actions = (await listAudit(db.pool, 'polling_priority_item', item.id)).map((a) => a.action);
  assert.deepEqual(actions, ['created', 'claimed', 'retry_scheduled', 'claimed', 'failed']);
});

test('priority item: a business failure fails at once', async () => {
  const cardId = cardIds[3]!;
  const { item } = await requestPriorityItem(db.pool, { cardId, types: ['realname'], actor: 'ops', source: 'api' });
  await claimPriorityItem(db.pool, { cardId, token: 'b1', leaseMs: 60_000 });
  const failed = await failPriorityItem(db.pool, { itemId: item.id, token: 'b1', reason: 'card no longer polled', retryable: false });
  assert.equal(failed?.status, 'failed');
  assert.equal(failed?.attemptCount, 1);
});

test('priority item: a processing item whose lease expired is taken over; on the last attempt it fails instead', async () => {
  const cardId = cardIds[4]!;
  const { item } = await requestPriorityItem(db.pool, { cardId, types: ['card_status'], actor: 'ops', source: 'api', attemptLimit: 2 });
  const t0 = new Date('2026-01-01T00:00:00Z');
  await claimPriorityItem(db.pool, { cardId, token: 'c1', leaseMs: 10_000, now: t0 });
  assert.equal((await claimPriorityItem(db.pool, { cardId, token: 'c2', leaseMs: 10_000, now: new Date(t0.getTime() + 5_000) })).status, 'busy');
  const takeover = await claimPriorityItem(db.pool, { cardId, token: 'c2', leaseMs: 10_000, now: new Date(t0.getTime() + 10_000) });
  assert.equal(takeover.status, 'taken_over');
  assert.equal(await completePriorityItem(db.pool, { itemId: item.id, token: 'c1' }), null, 'the crashed executor cannot finish');
  const exhausted = await claimPriorityItem(db.pool, { cardId, token: 'c3', leaseMs: 10_000, now: new Date(t0.getTime() + 30_000) });
  assert.equal(exhausted.status, 'exhausted');
  if (exhausted.status === 'exhausted') assert.equal(exhausted.item.status, 'failed');
  const actions = (await listAudit(db.pool, 'polling_priority_item', item.id)).map((a) => a.action);
  assert.deepEqual(actions, ['created', 'claimed', 'taken_over', 'failed']);
});

test('priority item: a merge into a pending item due for retry clears its next run (the merge requests it now)', async () => {
  const carrier = await makeCarrier(db.pool);
  const [card] = await insertCards(db.pool, [normaliseCard({ iccid: iccid(260), carrierId: carrier.id })]);
  const cardId = card!.id;
  const { item } = await requestPriorityItem(db.pool, { cardId, types: ['card_status'], actor: 'ops', source: 'api' });
  await claimPriorityItem(db.pool, { cardId, token: 'r1', leaseMs: 60_000 });
  const retry = await failPriorityItem(db.pool, {
    itemId: item.id,
    token: 'r1',
    reason: 'gateway timeout',
    retryable: true,
    nextRunAt: new Date(Date.now() - 1000),
  });
  assert.equal(retry?.status, 'pending');
  assert.deepEqual(
    (await listDuePriorityRetries(db.pool, carrier.id)).map((due) => due.id),
    [item.id],
  );
  // The scheduler's sweep (and any other trigger) requests the item again through a merge.
  const merged = await requestPriorityItem(db.pool, { cardId, types: ['card_status'], actor: 'carrierScheduler', source: 'priority-retry' });
  assert.equal(merged.merged, true);
  assert.equal(merged.item.nextRunAt, null, 'the merged item is requested now: no retry is due any more');
  assert.deepEqual(await listDuePriorityRetries(db.pool, carrier.id), [], 'the next sweep does not request it again');
});

test('priority item: the retry sweep returns an expired processing item to pending, due at once (audited); on its last attempt it fails', async () => {
  const carrier = await makeCarrier(db.pool); // lease_ms: the default 60 s
  const cards = await insertCards(
    db.pool,
    [270, 271, 272].map((n) => normaliseCard({ iccid: iccid(n), carrierId: carrier.id })),
  );
  const [expiredCard, busyCard, lastCard] = cards.map((card) => card.id) as [string, string, string];
  const request = (cardId: string, attemptLimit?: number) =>
    requestPriorityItem(db.pool, { cardId, types: ['card_status'], actor: 'ops', source: 'api', ...(attemptLimit ? { attemptLimit } : {}) });
  const expired = (await request(expiredCard)).item;
  const busy = (await request(busyCard)).item;
  const last = (await request(lastCard, 1)).item;
  // Claimed by executions that died before their record (a killed worker, a run that threw): no one
  // finishes them, and the Redis request they served is gone.
  const ago = (ms: number) => new Date(Date.now() - ms);
  await claimPriorityItem(db.pool, { cardId: expiredCard, token: 'dead-1', leaseMs: 60_000, now: ago(61_000) });
  await claimPriorityItem(db.pool, { cardId: busyCard, token: 'alive-1', leaseMs: 60_000, now: ago(10_000) });
  await claimPriorityItem(db.pool, { cardId: lastCard, token: 'dead-2', leaseMs: 60_000, now: ago(120_000) });

  assert.deepEqual(
    (await listDuePriorityRetries(db.pool, carrier.id)).map((due) => due.id),
    [expired.id],
    'the item whose claim outlived the lease is due again; the one still within it is not',
  );
  const returned = (await findActivePriorityItem(db.pool, expiredCard))!;
  assert.equal(returned.status, 'pending');
  assert.equal(returned.claimToken, null);
  assert.equal(returned.attemptCount, 1, 'the dead attempt counts');
  assert.ok(returned.nextRunAt !== null && returned.nextRunAt.getTime() <= Date.now(), `due now: ${String(returned.nextRunAt)}`);
  const audit = await listAudit(db.pool, 'polling_priority_item', expired.id);
  assert.deepEqual(
    audit.map((a) => [a.action, a.actor, a.reason ?? null]),
    [
      ['created', 'ops', null],
      ['claimed', 'worker', null],
      ['lease_expired', 'worker', 'claim lease expired'],
    ],
  );
  assert.deepEqual([snapshot(audit[2]!.before).status, snapshot(audit[2]!.after).status], ['processing', 'pending']);
  assert.equal((await findActivePriorityItem(db.pool, busyCard))?.status, 'processing', 'an unexpired claim is left alone');
  assert.equal(busy.status, 'pending');
  const lastState = await db.pool.query<{ status: string; failure_reason: string }>('SELECT status, failure_reason FROM polling_priority_item WHERE id = $1', [
    last.id,
  ]);
  assert.deepEqual(lastState.rows[0], { status: 'failed', failure_reason: 'claim lease expired on the last attempt' });
  assert.deepEqual(
    (await listAudit(db.pool, 'polling_priority_item', last.id)).map((a) => a.action),
    ['created', 'claimed', 'failed'],
  );

  // The dead executor's late record changes nothing; the next execution claims a new attempt.
  assert.equal(await completePriorityItem(db.pool, { itemId: expired.id, token: 'dead-1' }), null);
  const again = await claimPriorityItem(db.pool, { cardId: expiredCard, token: 'next-1', leaseMs: 60_000 });
  assert.equal(again.status, 'claimed');
  if (again.status === 'claimed') assert.equal(again.item.attemptCount, 2);
});

test('priority item: an idle account wakes by the time a processing item’s lease expires', async () => {
  const carrier = await makeCarrier(db.pool);
  const [card] = await insertCards(db.pool, [normaliseCard({ iccid: iccid(280), carrierId: carrier.id })]);
  await requestPriorityItem(db.pool, { cardId: card!.id, types: ['card_status'], actor: 'ops', source: 'api' });
  await claimPriorityItem(db.pool, { cardId: card!.id, token: 'sleepy-1', leaseMs: 60_000, now: new Date(Date.now() - 10_000) });
  const inMs = await nextPriorityRetryInMs(db.pool, carrier.id);
  assert.ok(inMs !== null && inMs > 45_000 && inMs <= 50_000, `the sweep is due when the 60 s lease claimed 10 s ago expires: ${inMs}`);
});

test('priority item: first requests of a card at once make one item, the others merge into it (no 409 naming the index)', async () => {
  const carrier = await makeCarrier(db.pool);
  const [card] = await insertCards(db.pool, [normaliseCard({ iccid: iccid(290), carrierId: carrier.id })]);
  assert.ok(card !== undefined);
  const results = await Promise.all(
    Array.from({ length: 10 }, (_, i) => requestPriorityItem(db.pool, { cardId: card.id, types: ['card_status'], actor: `caller${i}`, source: 'test' })),
  );
  assert.equal(results.filter((result) => !result.merged).length, 1, 'one creator');
  assert.equal(new Set(results.map((result) => result.item.id)).size, 1, 'one item');
  const active = await findActivePriorityItem(db.pool, card.id);
  assert.equal(active?.triggerCount, 10);
});
