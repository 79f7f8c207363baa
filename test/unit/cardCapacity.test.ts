/**
 * What a card worker runs at once in each run shape (src/workers/createWorker.ts): a batch shares
 * one workflow slot among its cards, so local activity slots, not workflow slots, bound it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/index.js';
import { cardLocalActivitySlots, cardsPerCardWorker, deploymentCardCapacity } from '../../src/workers/createWorker.js';

test('card shape: one card per workflow slot, local activity slots for bookkeeping and the gateway steps', () => {
  const config = loadConfig({});
  assert.equal(cardsPerCardWorker(config), config.WORKER_CARD_MAX_WORKFLOWS);
  assert.equal(cardLocalActivitySlots(config), config.WORKER_CARD_MAX_ACTIVITIES + config.WORKER_GATEWAY_MAX_ACTIVITIES);
  assert.equal(cardLocalActivitySlots(loadConfig({ GATEWAY_STEPS: 'queue' })), config.WORKER_CARD_MAX_ACTIVITIES);
});

test('batch shape: cards bounded by local activity slots, which hold at least four whole batches', () => {
  const batch = loadConfig({ CARD_RUN_SHAPE: 'batch' });
  // Defaults: 600 local activity slots, far above 4 batches of 50; 200 workflow slots × 50 cards is more than they run.
  assert.equal(cardLocalActivitySlots(batch), 600);
  assert.equal(cardsPerCardWorker(batch), 600);
  // Few slots configured: raised to 4 batches' worth, so a batch's cards never queue behind a single other batch.
  const small = loadConfig({ CARD_RUN_SHAPE: 'batch', CARD_BATCH_SIZE: '90', GATEWAY_STEPS: 'queue', WORKER_CARD_MAX_ACTIVITIES: '20' });
  assert.equal(cardLocalActivitySlots(small), 360);
  // Few workflow slots: each carries a batch at most.
  const fewWorkflows = loadConfig({ CARD_RUN_SHAPE: 'batch', CARD_BATCH_SIZE: '10', WORKER_CARD_MAX_WORKFLOWS: '3' });
  assert.equal(cardsPerCardWorker(fewWorkflows), 30);
});

test('the in-flight cap covers the card workers the deployment says it runs (CARD_WORKER_COUNT, default 4)', () => {
  assert.equal(deploymentCardCapacity(loadConfig({})), 4 * 200);
  assert.equal(deploymentCardCapacity(loadConfig({ CARD_WORKER_COUNT: '12' })), 12 * 200);
  assert.equal(deploymentCardCapacity(loadConfig({ CARD_WORKER_COUNT: '1', CARD_RUN_SHAPE: 'batch' })), 600);
  assert.throws(() => loadConfig({ CARD_WORKER_COUNT: '0' }), /CARD_WORKER_COUNT="0"/);
});
