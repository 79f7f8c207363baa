import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ackFailureAlert, listFailureAlerts, recordFailure, recoverFailures } from '../../src/db/alerts.js';
import { pageAccountAlerts } from '../../src/db/statusQueries.js';
import { insertCards } from '../../src/db/cards.js';
import { normaliseCard } from '../../src/domain/cardInput.js';
import { createTestDb, type TestDb } from '../../testkit/db.js';
import { iccid, makeCarrier } from './fixtures.js';

let db: TestDb;
before(async () => {
  db = await createTestDb('alerts');
});
after(() => db.close());

test('failure alert: opens at the threshold, one open per (card, type) under retries, recovered on success', async () => {
  const carrier = await makeCarrier(db.pool);
  const [card] = await insertCards(db.pool, [normaliseCard({ iccid: iccid(10), carrierId: carrier.id })]);
  const failure = { cardId: card!.id, carrierId: carrier.id, type: 'card_status' as const, error: 'transient|timeout' };
  // The account default threshold is 3.
  assert.equal((await recordFailure(db.pool, { ...failure, failCount: 2 })).opened, false);
  const opened = await recordFailure(db.pool, { ...failure, failCount: 3 });
  assert.equal(opened.opened, true);
  assert.equal(opened.alert?.status, 'open');
  const retried = await Promise.all([recordFailure(db.pool, { ...failure, failCount: 3 }), recordFailure(db.pool, { ...failure, failCount: 4 })]);
  assert.deepEqual(
    retried.map((r) => r.opened),
    [false, false],
  );
  assert.equal(retried[1].alert?.id, opened.alert?.id);
  let alerts = await listFailureAlerts(db.pool, { cardId: card!.id });
  assert.equal(alerts.length, 1);
  assert.equal(alerts[0]!.failCount, 4);

  assert.equal(await recoverFailures(db.pool, [{ cardId: card!.id, type: 'card_status' }]), 1);
  assert.equal(await recoverFailures(db.pool, [{ cardId: card!.id, type: 'card_status' }]), 0, 'retry of recovery is a no-op');
  // A new streak opens a new alert; the recovered one stays as history.
  assert.equal((await recordFailure(db.pool, { ...failure, failCount: 3 })).opened, true);
  alerts = await listFailureAlerts(db.pool, { cardId: card!.id });
  assert.deepEqual(alerts.map((a) => a.status).sort(), ['open', 'recovered']);
  assert.equal(
    await recoverFailures(db.pool, [
      { cardId: card!.id, type: 'card_status' },
      { cardId: card!.id, type: 'carddata' },
    ]),
    1,
  );
  const acked = await ackFailureAlert(db.pool, alerts[0]!.id, 'ops');
  assert.ok(acked.ackedAt);
});

test('account alert: more than N opened within W raises one open account alert', async () => {
  const carrier = await makeCarrier(db.pool);
  const cards = await insertCards(
    db.pool,
    [1, 2, 3, 4].map((n) => normaliseCard({ iccid: iccid(100 + n), carrierId: carrier.id })),
  );
  const now = new Date();
  const results = [];
  for (const card of cards) {
    results.push(
      await recordFailure(db.pool, {
        cardId: card.id,
        carrierId: carrier.id,
        type: 'carddata',
        failCount: 1,
        threshold: 1,
        accountThreshold: 2,
        accountWindowMs: 60_000,
        error: 'permanent|x',
        now,
      }),
    );
  }
  assert.deepEqual(
    results.map((r) => r.accountAlert !== null),
    [false, false, true, true],
  );
  assert.equal(results[2]!.accountAlert?.id, results[3]!.accountAlert?.id, 'one open account alert, refreshed');
  assert.equal(results[3]!.accountAlert?.alertCount, 4);
  // As the API lists them (GET /v1/alerts).
  const accountAlerts = (openOnly: boolean) => pageAccountAlerts(db.pool, { carrierId: carrier.id, openOnly }, undefined, 100);
  const open = await accountAlerts(true);
  assert.equal(open.length, 1);
  assert.equal(open[0]!.alertKind, 'failure_burst');

  // Resolved once the burst has recovered: open failure alerts back at the threshold (2) or below.
  assert.equal(await recoverFailures(db.pool, [{ cardId: cards[0]!.id, type: 'carddata' }]), 1);
  assert.equal((await accountAlerts(true)).length, 1, '3 still open: the burst goes on');
  assert.equal(await recoverFailures(db.pool, [{ cardId: cards[1]!.id, type: 'carddata' }]), 1);
  assert.equal((await accountAlerts(true)).length, 0, '2 open: the burst is over');
  const all = await accountAlerts(false);
  assert.equal(all[0]!.status, 'resolved');
});

test('failure alert: first_failed_at is the start of the streak', async () => {
  const carrier = await makeCarrier(db.pool);
  const [card] = await insertCards(db.pool, [normaliseCard({ iccid: iccid(20), carrierId: carrier.id })]);
  const firstFailedAt = new Date(Date.now() - 90_000);
  const opened = await recordFailure(db.pool, {
    cardId: card!.id,
    carrierId: carrier.id,
    type: 'card_status',
    failCount: 3,
    firstFailedAt,
    error: 'transient|timeout',
  });
  assert.equal(opened.alert?.firstFailedAt?.getTime(), firstFailedAt.getTime());
});
