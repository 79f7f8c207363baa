import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dueHorizon, MAX_DUE_HORIZON_MS } from '../../src/activities/control.js';
import { IntervalResolver, type Intervals, type PollingConfig } from '../../src/domain/pollingConfig.js';

test('due horizon: the lookahead, bounded by the cap, a quarter of the lease and half the shortest interval', () => {
  assert.equal(dueHorizon(1_800, 60_000, 300_000), 1_800);
  assert.equal(dueHorizon(20_000, 60_000, 300_000), MAX_DUE_HORIZON_MS);
  assert.equal(dueHorizon(3_000, 4_000, 300_000), 1_000, 'a quarter of a 4 s lease');
  assert.equal(dueHorizon(3_000, 60_000, 2_000), 1_000, 'half of 2 s intervals');
  assert.equal(dueHorizon(3_000, 60_000, null), 3_000, 'no polling config: no interval bound');
  assert.equal(dueHorizon(-5, 60_000, 300_000), 0);
});

test('shortest interval over the enabled polling configs', () => {
  const config = (id: string, enabled: boolean, intervalsSec: Intervals): PollingConfig => ({
    id,
    name: `config ${id}`,
    enabled,
    priority: 0,
    match: {},
    intervalsSec,
  });
  const resolver = new IntervalResolver([
    config('1', true, { card_status: 300, carddata: 600 }),
    config('2', false, { card_status: 5 }),
    config('3', true, { realname: 120 }),
  ]);
  assert.equal(resolver.shortestMs(), 120_000);
  assert.equal(new IntervalResolver([]).shortestMs(), null);
});
