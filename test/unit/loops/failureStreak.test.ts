/** The loops' failure state and backoff (FailureStreak), without a workflow: what each failure and success decides. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FailureStreak, MAX_BACKOFF_MS } from '../../../src/workflows/failureStreak.js';

const AT = Date.UTC(2026, 0, 1);

test('failure streak: the backoff doubles from twice the base (2, 4, 8, 16 s for a 1 s tick) and stays at 30 s', () => {
  const streak = new FailureStreak(1000);
  assert.equal(streak.backoffMs(), undefined, 'no backoff before a failure');
  const waits: (number | undefined)[] = [];
  for (let i = 0; i < 8; i += 1) {
    streak.record('claimRound', 'Redis away', AT + i);
    waits.push(streak.backoffMs());
  }
  assert.deepEqual(waits, [2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000, 30_000]);
  assert.equal(MAX_BACKOFF_MS, 30_000);
  // Another base doubles the same way, capped the same.
  const fast = new FailureStreak(100);
  for (let i = 0; i < 3; i += 1) fast.record('claimRound', 'x', AT);
  assert.equal(fast.backoffMs(), 800);
  for (let i = 0; i < 20; i += 1) fast.record('claimRound', 'x', AT);
  assert.equal(fast.backoffMs(), 30_000);
});

test('failure streak: a success ends the backoff, keeps the last failure with 0 in a row, and the next streak starts at 2 s again', () => {
  const streak = new FailureStreak(1000);
  assert.equal(streak.record('claimRound', 'first', AT), 1);
  assert.equal(streak.record('claimRound', 'second', AT + 2000), 2);
  streak.succeeded();
  assert.equal(streak.backoffMs(), undefined);
  assert.deepEqual(streak.view(), { lastFailure: { activity: 'claimRound', message: 'second', at: new Date(AT + 2000).toISOString(), consecutive: 0 } });
  assert.equal(streak.record('claimRound', 'third', AT + 9000), 1, 'counted from zero again');
  assert.equal(streak.backoffMs(), 2000);
});

test('failure streak: a failure reported without backoff (a signal’s request-check) counts in a row but neither starts nor lengthens the backoff', () => {
  const streak = new FailureStreak(1000);
  assert.deepEqual(streak.view(), {});
  assert.equal(streak.record('requestCheck', 'PostgreSQL away', AT, { backoff: false }), 1);
  assert.equal(streak.backoffMs(), undefined, 'the loop does not back off for it');
  assert.equal(streak.view().lastFailure?.activity, 'requestCheck');
  // A success of the loop's step does not clear it (the loop was never failing).
  streak.succeeded();
  assert.equal(streak.view().lastFailure?.consecutive, 1);
  // The loop's own failure after it: 2 s, as the first of its streak; further reports do not push it up.
  assert.equal(streak.record('claimRound', 'Redis away', AT + 1), 2);
  assert.equal(streak.backoffMs(), 2000);
  streak.record('releaseClaims', 'Redis away', AT + 2, { backoff: false });
  streak.record('requestCheck', 'PostgreSQL away', AT + 3, { backoff: false });
  assert.equal(streak.backoffMs(), 2000);
  assert.equal(streak.view().lastFailure?.consecutive, 4);
});
