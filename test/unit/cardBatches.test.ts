import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cardBatchWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { cardBatches, priorityFirst } from '../../src/workflow-safe/cardBatches.js';
import type { ClaimedCard } from '../../src/workflow-safe/claimRound.js';

const card = (id: number, fromPriority: boolean): ClaimedCard => ({ cardId: String(id), token: `r.1@0:${id}`, fromPriority });

test('card batches: priority cards first in batches of their own, each lane in claim order, at most `size` cards each', () => {
  const claimed = [card(1, false), card(2, true), card(3, false), card(4, false), card(5, true), card(6, false), card(7, true)];
  const batches = cardBatches(claimed, 2);
  assert.deepEqual(
    batches.map((b) => ({ index: b.index, fromPriority: b.fromPriority, cards: b.cards.map((c) => c.cardId) })),
    [
      { index: 0, fromPriority: true, cards: ['2', '5'] },
      { index: 1, fromPriority: true, cards: ['7'] },
      { index: 2, fromPriority: false, cards: ['1', '3'] },
      { index: 3, fromPriority: false, cards: ['4', '6'] },
    ],
  );
  // Every card exactly once.
  assert.deepEqual(batches.flatMap((b) => b.cards.map((c) => c.cardId)).sort(), claimed.map((c) => c.cardId).sort());
});

test('card batches: none for an empty round; one batch when the round fits', () => {
  assert.deepEqual(cardBatches([], 50), []);
  assert.equal(cardBatches([card(1, false), card(2, false)], 50).length, 1);
});

test('card batches: the size must be a positive integer', () => {
  assert.throws(() => cardBatches([card(1, false)], 0), /positive integer, got 0/);
  assert.throws(() => cardBatches([card(1, false)], 1.5), /positive integer, got 1.5/);
});

test('batch workflow ids: one per round and position, with the deployment prefix', () => {
  assert.equal(cardBatchWorkflowId('7', 'run-a.12', 3), 'card-batch-7-run-a.12-3');
  assert.equal(cardBatchWorkflowId('7', 'run-a.12', 3, 'test-'), 'test-card-batch-7-run-a.12-3');
  assert.notEqual(cardBatchWorkflowId('7', 'run-a.12', 0), cardBatchWorkflowId('7', 'run-a.13', 0));
});

test('priorityFirst: the priority cards first, each lane in claim order (a claim lists the ones past the in-flight limit last)', () => {
  const cards = [card(1, true), card(2, false), card(3, false), card(4, true), card(5, false)];
  assert.deepEqual(
    priorityFirst(cards).map((c) => c.cardId),
    ['1', '4', '2', '3', '5'],
  );
  assert.deepEqual(priorityFirst([]), []);
});
