/** Where a round's card runs go and under which id (cardRunStarts), and how a batch of signals splits by card (requestsByCard). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cardBatchStart, cardCheckStart } from '../../../src/workflows/scheduler/cardRunStarts.js';
import { requestsByCard } from '../../../src/workflows/scheduler/signalQueue.js';
import { CARD_ID_ATTRIBUTE, CARD_IDS_ATTRIBUTE, CARRIER_ID_ATTRIBUTE, CLAIMED_BY_ATTRIBUTE } from '../../../src/workflow-safe/searchAttributes.js';
import { QUEUES, card, request, schedulerArgs } from './schedulerFixtures.js';

const CLAIMED_BY = 'carrier-scheduler-7/run1';

test('cardCheck start: id card-<id> (with the prefix), a new run per execution, abandoned; the priority lane on its own queue; the due horizon only when there is one', () => {
  const args = schedulerArgs({ workflowIdPrefix: 'p-' });
  const normal = cardCheckStart(args, { kind: 'card', card: card('42'), claimedAt: 5000, dueHorizonMs: 0 }, CLAIMED_BY);
  assert.equal(normal.workflowId, 'p-card-42');
  assert.equal(normal.taskQueue, QUEUES.card);
  assert.equal(normal.parentClosePolicy, 'ABANDON');
  assert.equal(normal.workflowIdReusePolicy, 'ALLOW_DUPLICATE');
  assert.deepEqual(normal.args, [{ carrierId: '7', cardId: '42', token: 'run1.1@0:42', fromPriority: false, claimedAt: 5000, taskQueues: QUEUES }]);
  assert.deepEqual(normal.typedSearchAttributes, [
    { key: CARD_ID_ATTRIBUTE, value: '42' },
    { key: CARRIER_ID_ATTRIBUTE, value: '7' },
    { key: CLAIMED_BY_ATTRIBUTE, value: CLAIMED_BY },
  ]);
  const priority = cardCheckStart(args, { kind: 'card', card: card('43', true), claimedAt: 5000, dueHorizonMs: 300 }, CLAIMED_BY);
  assert.equal(priority.taskQueue, QUEUES.cardPriority);
  assert.deepEqual(priority.priority, { priorityKey: 1 }, 'the priority lane goes first on shared queues');
  assert.equal(normal.priority, undefined, "the normal lane keeps the server's default");
  assert.equal(priority.args[0].dueHorizonMs, 300);
  assert.equal(priority.args[0].fromPriority, true);
});

test('cardBatch start: id naming the account, round and batch; the batch’s lane’s queue; every card in CardIds', () => {
  const batch = { index: 1, fromPriority: true, cards: [card('1', true), card('2', true)] };
  const start = cardBatchStart(schedulerArgs(), { kind: 'batch', batch, tokenPrefix: 'run1.7', claimedAt: 9000, dueHorizonMs: 0 }, CLAIMED_BY);
  assert.match(start.workflowId ?? '', /run1\.7/);
  assert.notEqual(
    start.workflowId,
    cardBatchStart(schedulerArgs(), { kind: 'batch', batch: { ...batch, index: 2 }, tokenPrefix: 'run1.7', claimedAt: 9000, dueHorizonMs: 0 }, CLAIMED_BY)
      .workflowId,
    'two batches of a round never share an id',
  );
  assert.equal(start.taskQueue, QUEUES.cardPriority);
  assert.equal(start.parentClosePolicy, 'ABANDON');
  assert.deepEqual(start.args, [{ carrierId: '7', cards: batch.cards, fromPriority: true, claimedAt: 9000, taskQueues: QUEUES }]);
  assert.ok(Array.isArray(start.typedSearchAttributes));
  assert.deepEqual(start.typedSearchAttributes, [
    { key: CARD_IDS_ATTRIBUTE, value: ['1', '2'] },
    { key: CARRIER_ID_ATTRIBUTE, value: '7' },
    { key: CLAIMED_BY_ATTRIBUTE, value: CLAIMED_BY },
  ]);
});

test('requestsByCard: one list per card, each in arrival order, cards in order of their first request', () => {
  const batch = [request('1', 'a'), request('2', 'b'), request('1', 'c'), request('3', 'd'), request('2', 'e')];
  assert.deepEqual(
    requestsByCard(batch).map((requests) => requests.map((r) => `${r.cardId}${r.actor}`)),
    [['1a', '1c'], ['2b', '2e'], ['3d']],
  );
});
