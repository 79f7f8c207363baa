import { test } from 'node:test';
import assert from 'node:assert/strict';
import { IntervalResolver, type PollingConfig, type PollingMatch, type Intervals } from '../../src/domain/pollingConfig.js';

const config = (id: string, enabled: boolean, match: PollingMatch, intervalsSec: Intervals): PollingConfig => ({
  id,
  name: `config ${id}`,
  enabled,
  priority: 0,
  match,
  intervalsSec,
});

test("the types an account polls under any card status: its own and the global enabled configs' (what the claim keeps)", () => {
  const resolver = new IntervalResolver([
    config('1', true, { cardStatus: 'active' }, { card_status: 300 }),
    config('2', true, { carrierId: '7', cardStatus: 'suspended' }, { carddata: 600 }),
    config('3', false, { carrierId: '7' }, { realname: 60 }),
    config('4', true, { carrierId: '8' }, { package: 60 }),
  ]);
  assert.deepEqual(resolver.typesPolledBy('7'), ['card_status', 'carddata']);
  assert.deepEqual(resolver.typesPolledBy('8'), ['card_status', 'package']);
  assert.deepEqual(new IntervalResolver([]).typesPolledBy('7'), []);
});
