import { test } from 'node:test';
import assert from 'node:assert/strict';
import { settleAll } from '../../src/runtime/settleAll.js';

test('settleAll rejects with the first failure only once every promise settled (a slow query is never left running)', async () => {
  let slowDone = false;
  const slow = new Promise<number>((resolve) =>
    setTimeout(() => {
      slowDone = true;
      resolve(1);
    }, 50),
  );
  const failing = Promise.reject(new Error('postgres away'));
  await assert.rejects(settleAll([slow, failing] as const), /postgres away/);
  assert.equal(slowDone, true, 'rejected while the slow promise was still pending');
});

test('settleAll resolves to the values in order', async () => {
  assert.deepEqual(await settleAll([Promise.resolve('a'), Promise.resolve(2)] as const), ['a', 2]);
});
