/** WakeCoalescer (src/app/wakeCoalescer.ts): one wake-up in flight per key, each caller served by one sent after it. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WakeCoalescer } from '../../src/app/wakeCoalescer.js';

/** A send the test completes by hand, counting the sends. */
function gatedSends(): { send: () => Promise<void>; sends: number; finish: (error?: Error) => void } {
  const gates: ((error?: Error) => void)[] = [];
  const out = {
    sends: 0,
    send: () => {
      out.sends += 1;
      return new Promise<void>((resolve, reject) => gates.push((error) => (error ? reject(error) : resolve())));
    },
    finish: (error?: Error) => gates.shift()?.(error),
  };
  return out;
}

const settled = async (promise: Promise<void>): Promise<string> => {
  const marker = Symbol('pending');
  const result = await Promise.race([
    promise.then(
      () => 'resolved',
      () => 'rejected',
    ),
    new Promise((resolve) => setImmediate(() => resolve(marker))),
  ]);
  return result === marker ? 'pending' : String(result);
};

test('a burst while a wake-up is in flight shares one more; each caller waits for a wake-up sent after it', async () => {
  const coalescer = new WakeCoalescer();
  const gate = gatedSends();
  const first = coalescer.wake('a', gate.send);
  const burst = Array.from({ length: 100 }, () => coalescer.wake('a', gate.send));
  assert.equal(gate.sends, 1, 'one in flight');
  gate.finish();
  assert.equal(await settled(first), 'resolved');
  assert.equal(await settled(burst[0]!), 'pending', 'the burst came after the first wake-up started: it waits for the next');
  assert.equal(gate.sends, 2, 'the whole burst: one wake-up');
  const late = coalescer.wake('a', gate.send);
  gate.finish();
  assert.deepEqual(
    await Promise.all(burst.map(settled)),
    burst.map(() => 'resolved'),
  );
  assert.equal(await settled(late), 'pending');
  gate.finish();
  assert.equal(await settled(late), 'resolved');
  assert.equal(gate.sends, 3);
  assert.equal(coalescer.sent, 3);
});

test('keys are independent; a failed wake-up rejects its callers only, and the next one is still sent', async () => {
  const coalescer = new WakeCoalescer();
  const a = gatedSends();
  const b = gatedSends();
  const a1 = coalescer.wake('a', a.send);
  const b1 = coalescer.wake('b', b.send);
  assert.equal(a.sends + b.sends, 2);
  const a2 = coalescer.wake('a', a.send);
  a.finish(new Error('closing run'));
  assert.equal(await settled(a1), 'rejected');
  a.finish();
  assert.equal(await settled(a2), 'resolved');
  b.finish();
  assert.equal(await settled(b1), 'resolved');
});
