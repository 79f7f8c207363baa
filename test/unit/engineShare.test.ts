import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ENGINE_SHARE_FRESH_MS, fairEngineRate, type EngineShareEntry } from '../../src/workflow-safe/engineShare.js';

const NOW = 1_000_000;
const entry = (carrierId: string, weight: number, startsPerSec: number, wanting = true, at = NOW): EngineShareEntry => ({
  carrierId,
  weight,
  startsPerSec,
  wanting,
  at,
});
const near = (actual: number | null, expected: number): void =>
  assert.ok(actual !== null && Math.abs(actual - expected) < 1e-9, `${String(actual)} ≠ ${expected}`);

test('engine share: the accounts held back by the engine split its throughput by budget', () => {
  // The overload bench's child mode: each scheduler ran ~18/s whatever its budget.
  const entries = [entry('1', 23, 17.3), entry('2', 46, 19.7), entry('4', 92, 18.4)];
  const total = 17.3 + 19.7 + 18.4;
  near(fairEngineRate(entries, '1', NOW), total / 7);
  near(fairEngineRate(entries, '2', NOW), (total * 2) / 7);
  near(fairEngineRate(entries, '4', NOW), (total * 4) / 7);
});

test('engine share: an account content with less than its share keeps it; the others split the rest', () => {
  // Weights 1 : 1 : 2, 22/s in all: shares 5.5 / 5.5 / 11; the first runs 2/s and wants no more.
  const entries = [entry('a', 1, 2, false), entry('b', 1, 10), entry('c', 2, 10)];
  assert.equal(fairEngineRate(entries, 'a', NOW), null);
  near(fairEngineRate(entries, 'b', NOW), 20 / 3);
  near(fairEngineRate(entries, 'c', NOW), 40 / 3);
  // Held back by nothing but above its share (its budget lets it run more): it is bounded too.
  const greedy = [entry('a', 1, 12, false), entry('b', 1, 4), entry('c', 2, 4)];
  near(fairEngineRate(greedy, 'a', NOW), 5);
});

test('engine share: no bound when the engine holds nobody back, when alone, or for entries gone stale', () => {
  assert.equal(fairEngineRate([entry('a', 1, 10, false), entry('b', 2, 10, false)], 'a', NOW), null);
  assert.equal(fairEngineRate([entry('a', 1, 10)], 'a', NOW), null);
  const staleAt = NOW - ENGINE_SHARE_FRESH_MS - 1;
  assert.equal(fairEngineRate([entry('a', 1, 10), entry('b', 2, 10, true, staleAt)], 'a', NOW), null);
  // A stale account's rate counts for nothing: two fresh ones split their own 20/s.
  near(fairEngineRate([entry('a', 1, 10), entry('b', 1, 10), entry('c', 8, 50, true, staleAt)], 'a', NOW), 10);
  // An account missing from the table (its write lost) gets no bound.
  assert.equal(fairEngineRate([entry('a', 1, 10), entry('b', 2, 10)], 'z', NOW), null);
});
