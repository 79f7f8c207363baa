import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig, ConfigError, taskQueues } from '../../src/config/index.js';

test('config: defaults are loopback and task queues are defined once', () => {
  const config = loadConfig({});
  assert.equal(config.TEMPORAL_ADDRESS, '127.0.0.1:7233');
  assert.match(config.REDIS_URL, /^redis:\/\/127\.0\.0\.1:/);
  assert.deepEqual(taskQueues(config), {
    control: 'polling-control',
    card: 'polling-card',
    cardPriority: 'polling-card-priority',
    gateway: 'polling-gateway',
    ingest: 'polling-ingest',
  });
});

test('config: a bad value names the variable and the value', () => {
  const cases: [Record<string, string>, string][] = [
    [{ API_PORT: '70000' }, 'API_PORT'],
    [{ REDIS_URL: 'not a url' }, 'REDIS_URL'],
    [{ WORKER_CARD_MAX_WORKFLOWS: '-3' }, 'WORKER_CARD_MAX_WORKFLOWS'],
    [{ DATABASE_SCHEMA: 'Robert"); DROP' }, 'DATABASE_SCHEMA'],
    [{ API_TOKEN: 'short' }, 'API_TOKEN'],
    [{ CARD_RUN_SHAPE: 'batches' }, 'CARD_RUN_SHAPE'],
    [{ CARD_BATCH_SIZE: '0' }, 'CARD_BATCH_SIZE'],
    // CardIds must fit Temporal's 2 KB search attribute value limit.
    [{ CARD_BATCH_SIZE: '91' }, 'CARD_BATCH_SIZE'],
    [{ CARD_BATCH_SIZE: '12.5' }, 'CARD_BATCH_SIZE'],
  ];
  for (const [env, variable] of cases) {
    assert.throws(
      () => loadConfig(env),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.variable === variable &&
        error.message.includes(variable) &&
        error.message.includes(JSON.stringify(env[variable])),
      variable,
    );
  }
});

test('config: the card run shape is one run per card unless batch is asked for', () => {
  assert.equal(loadConfig({}).CARD_RUN_SHAPE, 'card');
  assert.equal(loadConfig({}).CARD_BATCH_SIZE, 50);
  const batch = loadConfig({ CARD_RUN_SHAPE: 'batch', CARD_BATCH_SIZE: '90' });
  assert.equal(batch.CARD_RUN_SHAPE, 'batch');
  assert.equal(batch.CARD_BATCH_SIZE, 90);
});

test('config: an empty variable falls back to the default', () => {
  assert.equal(loadConfig({ API_PORT: '' }).API_PORT, 8080);
  assert.equal(loadConfig({ API_PORT: '9090' }).API_PORT, 9090);
});
