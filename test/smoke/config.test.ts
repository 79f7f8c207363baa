import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, ConfigError, taskQueues } from '../../src/config/index.js';
import { loadProcessBundle, workflowCodeHash } from '../../src/workers/workflowBundle.js';
import { sandboxThreadOptions } from '../../src/workers/createWorker.js';

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
    [{ WORKFLOW_BUNDLE_PATH: '/nonexistent/workflow-bundle.js' }, 'WORKFLOW_BUNDLE_PATH'],
    [{ WORKFLOW_SANDBOX_THREAD: 'fiber' }, 'WORKFLOW_SANDBOX_THREAD'],
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

test('config: WORKFLOW_BUNDLE_PATH names a bundle file a worker process loads instead of bundling the sources', async () => {
  const path = join(mkdtempSync(join(tmpdir(), 'bundle-path-')), 'workflow-bundle.js');
  writeFileSync(path, '/* a bundle */');
  const config = loadConfig({ WORKFLOW_BUNDLE_PATH: path });
  assert.equal(config.WORKFLOW_BUNDLE_PATH, path);
  const loaded = await loadProcessBundle(config.WORKFLOW_BUNDLE_PATH);
  assert.deepEqual(loaded, { bundle: { codePath: path }, codeHash: workflowCodeHash('/* a bundle */'), source: 'prebuilt' });
});

test('config: the workflow sandbox runs in a worker thread unless main is asked for, whose deadlock timeout stays 5 s', () => {
  assert.equal(loadConfig({}).WORKFLOW_SANDBOX_THREAD, 'worker');
  assert.deepEqual(sandboxThreadOptions(loadConfig({}).WORKFLOW_SANDBOX_THREAD), {});
  assert.deepEqual(sandboxThreadOptions(loadConfig({ WORKFLOW_SANDBOX_THREAD: 'main' }).WORKFLOW_SANDBOX_THREAD), {
    debugMode: true,
    isolateExecutionTimeout: '5s',
  });
});
