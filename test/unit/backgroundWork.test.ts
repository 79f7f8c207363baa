import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BackgroundWork } from '../../src/activities/backgroundWork.js';

test('background work: settle waits for what is tracked, logs a failure instead of throwing, and gives up after its timeout', async () => {
  const logged: string[] = [];
  const work = new BackgroundWork((message, fields) => logged.push(`${message} ${String(fields.error)}`));
  assert.equal(await work.settle(10), 0, 'nothing tracked');
  let finish: () => void = () => undefined;
  work.track('held', new Promise<void>((resolve) => (finish = resolve)));
  work.track('failing', Promise.reject(new Error('start refused')));
  assert.equal(work.size, 2);
  assert.equal(await work.settle(20), 1, 'the held work is still under way after the timeout');
  assert.deepEqual(logged, ['failing failed after its activity returned Error: start refused']);
  finish();
  assert.equal(await work.settle(10_000), 0);
  assert.equal(work.size, 0);
});
