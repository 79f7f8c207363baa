import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isRejectedRequestCheck } from '../../src/activities/control.js';
import { RequestCheckInvalid } from '../../src/workflow-safe/requestCheckValidation.js';
import { DomainError } from '../../src/domain/errors.js';

const pgError = (code: string): Error => Object.assign(new Error(`pg ${code}`), { code });

test('request-check: which failures are rejections for good (dropped) and which are retried', () => {
  assert.equal(isRejectedRequestCheck(DomainError.invalid('types', 'bad')), true);
  assert.equal(isRejectedRequestCheck(DomainError.notFound('cardId', 'card gone')), true);
  assert.equal(isRejectedRequestCheck(new RequestCheckInvalid('cardId', 'must be a numeric id')), true);
  assert.equal(isRejectedRequestCheck(pgError('22003')), true, 'numeric value out of range (an id beyond bigint)');
  assert.equal(isRejectedRequestCheck(pgError('22P02')), true, 'invalid text representation');
  // A concurrent creator of the card's priority item: the retry merges into it.
  assert.equal(isRejectedRequestCheck(DomainError.conflict('polling_priority_item_active_card_key', 'exists')), false);
  assert.equal(isRejectedRequestCheck(pgError('40P01')), false, 'deadlock');
  assert.equal(isRejectedRequestCheck(pgError('08006')), false, 'connection failure');
  assert.equal(isRejectedRequestCheck(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })), false);
  assert.equal(isRejectedRequestCheck(new Error('Connection terminated unexpectedly')), false);
});
