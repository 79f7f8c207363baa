import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sameTurnBatcher } from '../../src/runtime/sameTurnBatcher.js';

test('sameTurnBatcher: calls of one turn go in one batch, in call order; a later turn gets a batch of its own', async () => {
  const batches: number[][] = [];
  const double = sameTurnBatcher(async (inputs: readonly number[]) => {
    batches.push([...inputs]);
    return inputs.map((n) => n * 2);
  });
  assert.deepEqual(await Promise.all([double(1), double(2), double(3)]), [2, 4, 6]);
  assert.deepEqual(await double(4), 8);
  assert.deepEqual(batches, [[1, 2, 3], [4]]);
});

test('sameTurnBatcher: a failing batch (thrown or returned short) rejects each of its calls, and the next batch works', async () => {
  let fail: 'throw' | 'short' | 'no' = 'throw';
  const echo = sameTurnBatcher((inputs: readonly string[]): Promise<readonly string[]> => {
    if (fail === 'throw') throw new Error('store away'); // before returning a promise
    return Promise.resolve(fail === 'short' ? inputs.slice(1) : inputs);
  });
  const thrown = await Promise.allSettled([echo('a'), echo('b')]);
  assert.deepEqual(
    thrown.map((s) => (s.status === 'rejected' ? String(s.reason) : s.value)),
    ['Error: store away', 'Error: store away'],
  );
  fail = 'short';
  const short = await Promise.allSettled([echo('a'), echo('b')]);
  assert.equal(short[0].status, 'fulfilled');
  const second = short[1];
  assert.match(second.status === 'rejected' ? String(second.reason) : second.value, /returned 1 outputs for 2 inputs/);
  fail = 'no';
  assert.equal(await echo('c'), 'c');
});
