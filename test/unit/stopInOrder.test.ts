/** stopInOrder: steps in order, a failed step does not end the stop, a step that never ends is named and ends it. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { stopInOrder } from '../../src/runtime/stopInOrder.js';

test('steps run in order; a failing step is logged and the later ones still run', async () => {
  const ran: string[] = [];
  const log: string[] = [];
  const outcome = await stopInOrder(
    [
      { name: 'the live line', run: async () => void ran.push('live') },
      { name: 'the API', run: () => Promise.reject(new Error('already closed')) },
      { name: 'the workers', run: async () => void ran.push('workers') },
    ],
    { stepLimitMs: 1_000, log: (line) => log.push(line) },
  );
  assert.deepEqual(outcome, { kind: 'stopped' });
  assert.deepEqual(ran, ['live', 'workers']);
  assert.deepEqual(log, ['stopping the API failed: already closed']);
});

test('a step that never ends is named, and the steps after it do not run', async () => {
  const ran: string[] = [];
  const log: string[] = [];
  const outcome = await stopInOrder(
    [
      { name: 'the workers', run: () => new Promise<void>(() => undefined) },
      { name: 'the simulator', run: async () => void ran.push('simulator') },
    ],
    { stepLimitMs: 50, log: (line) => log.push(line) },
  );
  assert.deepEqual(outcome, { kind: 'stuck', step: 'the workers' });
  assert.deepEqual(ran, []);
  assert.equal(log.length, 1);
  assert.match(log[0]!, /^stopping the workers has not ended after 0.05 s; giving up the stop there$/);
});
