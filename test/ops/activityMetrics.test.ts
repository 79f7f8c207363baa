/**
 * The activity metrics as Prometheus sees them: the start lag is a histogram; an account's claim
 * round gauges leave a process that no longer runs its rounds; the enabled-account list is the
 * last one listed and leaves when no longer listed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { createActivityMetrics, ENABLED_LIST_STALE_MS, ROUND_GAUGES_STALE_MS } from '../../src/runtime/metrics.js';

function metricsAt(clock: { now: number }) {
  const registry = new Registry();
  return { registry, metrics: createActivityMetrics(registry, { now: () => clock.now }) };
}

/** The sample lines of a metric family in the exposition. */
async function samples(registry: Registry, name: string): Promise<string[]> {
  return (await registry.metrics()).split('\n').filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `));
}

const round = { limitedBy: 'orchestration' as const, inflightLimit: 12, groups: [{ name: 'main', qpsConfigured: 20, qpsEffective: 15 }] };

test('the start lag of each execution is a histogram per account, in seconds', async () => {
  const { registry, metrics } = metricsAt({ now: 0 });
  metrics.executionStart('7', 40);
  metrics.executionStart('7', 1500);
  metrics.executionStart('7', 45_000);
  const text = await registry.metrics();
  assert.match(text, /^# TYPE cardpoller_execution_start_lag_seconds histogram$/m);
  assert.match(text, /^cardpoller_execution_start_lag_seconds_bucket\{le="0.05",carrier="7"\} 1$/m);
  assert.match(text, /^cardpoller_execution_start_lag_seconds_bucket\{le="2",carrier="7"\} 2$/m);
  assert.match(text, /^cardpoller_execution_start_lag_seconds_bucket\{le="60",carrier="7"\} 3$/m);
  assert.match(text, /^cardpoller_execution_start_lag_seconds_count\{carrier="7"\} 3$/m);
  assert.match(text, /^cardpoller_execution_start_lag_seconds_sum\{carrier="7"\} 46.54$/m);
  assert.doesNotMatch(text, /cardpoller_execution_start_lag_seconds_total/, 'the summed counter is gone');
});

test("a process drops an account's round gauges once it has run none of its rounds for a while; counters stay", async () => {
  const clock = { now: 1_000_000 };
  const { registry, metrics } = metricsAt(clock);
  metrics.claimRound('1', 3, 1, 5, { priority: 0, normal: 9 });
  metrics.orchestration('1', round);
  clock.now += ROUND_GAUGES_STALE_MS / 2;
  metrics.claimRound('2', 1, 0, 1, { priority: 1, normal: 2 });
  metrics.orchestration('2', round);
  assert.equal((await samples(registry, 'cardpoller_limited_by')).length, 10, 'both accounts, five factors each');

  clock.now += ROUND_GAUGES_STALE_MS / 2 + 1;
  for (const gauge of [
    'cardpoller_inflight',
    'cardpoller_queue_depth',
    'cardpoller_limited_by',
    'cardpoller_inflight_limit',
    'cardpoller_rate_limit_qps',
    'cardpoller_rate_limit_effective_qps',
  ]) {
    const lines = await samples(registry, gauge);
    assert.ok(lines.length > 0 && lines.every((line) => line.includes('carrier="2"')), `${gauge} has account 2 only: ${lines.join(' | ')}`);
  }
  assert.deepEqual(await samples(registry, 'cardpoller_claimed_total'), ['cardpoller_claimed_total{carrier="1"} 3', 'cardpoller_claimed_total{carrier="2"} 1']);
  assert.deepEqual(await samples(registry, 'cardpoller_lease_expiries_total'), ['cardpoller_lease_expiries_total{carrier="1"} 1']);

  // A round here again brings the account back.
  metrics.orchestration('1', { ...round, limitedBy: 'budget' });
  assert.ok((await samples(registry, 'cardpoller_limited_by')).includes('cardpoller_limited_by{carrier="1",factor="budget"} 1'));
});

test('the budget of each group: configured and effective calls per second', async () => {
  const { registry, metrics } = metricsAt({ now: 0 });
  metrics.orchestration('3', {
    ...round,
    groups: [
      { name: 'main', qpsConfigured: 20, qpsEffective: 15 },
      { name: 'bulk', qpsConfigured: 5, qpsEffective: 5 },
    ],
  });
  assert.deepEqual(await samples(registry, 'cardpoller_rate_limit_qps'), [
    'cardpoller_rate_limit_qps{carrier="3",group="main"} 20',
    'cardpoller_rate_limit_qps{carrier="3",group="bulk"} 5',
  ]);
  assert.deepEqual(await samples(registry, 'cardpoller_rate_limit_effective_qps'), [
    'cardpoller_rate_limit_effective_qps{carrier="3",group="main"} 15',
    'cardpoller_rate_limit_effective_qps{carrier="3",group="bulk"} 5',
  ]);
});

test('scheduler rounds are stamped with their time; the enabled accounts are the last list, dropped when not listed again', async () => {
  const clock = { now: 1_700_000_000_000 };
  const { registry, metrics } = metricsAt(clock);
  metrics.schedulerRound('4');
  assert.deepEqual(await samples(registry, 'cardpoller_scheduler_last_round_timestamp_seconds'), [
    'cardpoller_scheduler_last_round_timestamp_seconds{carrier="4"} 1700000000',
  ]);
  metrics.enabledAccounts(['4', '5']);
  metrics.enabledAccounts(['5', '6']);
  assert.deepEqual(await samples(registry, 'cardpoller_account_enabled'), [
    'cardpoller_account_enabled{carrier="5"} 1',
    'cardpoller_account_enabled{carrier="6"} 1',
  ]);
  clock.now += ENABLED_LIST_STALE_MS + 1;
  assert.deepEqual(await samples(registry, 'cardpoller_account_enabled'), [], 'a process that stopped listing (pollingControl moved) says nothing');
});

test('gateway calls carry the rate-limit group of their type', async () => {
  const { registry, metrics } = metricsAt({ now: 0 });
  metrics.gatewayCall('1', 'main', 'card_status', 'rate_limited', 12);
  metrics.gatewayCall('1', '', 'realname', 'success', 12);
  const lines = await samples(registry, 'cardpoller_gateway_latency_seconds_count');
  assert.deepEqual(lines, [
    'cardpoller_gateway_latency_seconds_count{carrier="1",group="main",type="card_status",outcome="rate_limited"} 1',
    'cardpoller_gateway_latency_seconds_count{carrier="1",group="",type="realname",outcome="success"} 1',
  ]);
});
