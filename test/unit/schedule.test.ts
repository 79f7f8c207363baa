import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoffDelay, confirmationStep, initialJitter, nextDueAfterSuccess } from '../../src/workflow-safe/schedule.js';

test('next due keeps the phase and is never in the past', () => {
  assert.equal(nextDueAfterSuccess(10_000, 5_000, 12_000), 15_000);
  // Late by 2.5 intervals: skips to the next slot on the same phase.
  assert.equal(nextDueAfterSuccess(10_000, 5_000, 22_500), 25_000);
  // Exactly on a slot boundary: the next one, never "now".
  assert.equal(nextDueAfterSuccess(10_000, 5_000, 15_000), 20_000);
  assert.equal(nextDueAfterSuccess(undefined, 5_000, 7), 5_007);
});

test('backoff grows exponentially from the base, is capped, and jittered in [raw/2, raw]', () => {
  const policy = { baseMs: 1_000, capMs: 10_000 };
  assert.equal(
    backoffDelay(1, policy, () => 1),
    1_000,
  );
  assert.equal(
    backoffDelay(1, policy, () => 0),
    500,
  );
  assert.equal(
    backoffDelay(3, policy, () => 1),
    4_000,
  );
  assert.equal(
    backoffDelay(10, policy, () => 1),
    10_000,
  );
  assert.equal(
    backoffDelay(10, policy, () => 0),
    5_000,
  );
});

test('initial jitter is within [0, max(interval/10, 2 s))', () => {
  assert.equal(
    initialJitter(60_000, () => 0),
    0,
  );
  assert.equal(
    initialJitter(60_000, () => 0.999999),
    5_999,
  );
  assert.equal(
    initialJitter(100_000, () => 0.5),
    5_000,
  );
});

test('confirmation: confirmed, again with remaining delays, exhausted', () => {
  assert.deepEqual(confirmationStep({ delaysSec: [10, 30], expected: 'offline' }, 'offline'), { kind: 'confirmed' });
  assert.deepEqual(confirmationStep({ delaysSec: [10, 30], expected: 'offline' }, 'online'), { kind: 'again', delayMs: 10_000, remaining: [30] });
  assert.deepEqual(confirmationStep({ delaysSec: [], expected: 'offline' }, 'online'), { kind: 'exhausted' });
});
