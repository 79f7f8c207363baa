import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SlidingWindow } from '../../src/simulator/slidingWindow.js';
import type { GroupStats } from '../../src/simulator/model.js';
import { densest, judgeArrivals, type SentCall } from '../gateway/arrivals.js';

const T0 = 1_800_000_000_000;

/** `count` sends `spacingMs` apart from `from`, named c0, c1, …. */
function sends(count: number, spacingMs: number, from = T0): SentCall[] {
  return Array.from({ length: count }, (_, i) => ({ call: `c${i}`, at: from + i * spacingMs }));
}

/** What the simulator would report for `calls` read `readAfterMs(i)` after their send. */
function group(calls: readonly SentCall[], readAfterMs: (i: number) => number): GroupStats {
  const window = new SlidingWindow(1000);
  calls.forEach((c, i) => window.record(c.at + readAfterMs(i), c.call));
  return {
    calls: calls.length,
    rejected: 0,
    maxPerSecond: window.max,
    maxAcceptedPerSecond: window.max,
    faults: 0,
    busiestSecond: window.worst.map((e) => ({ call: e.label, arrivedAtMs: e.at })),
  };
}

describe('sliding window', () => {
  test('keeps the entries of the first window that held the most', () => {
    const w = new SlidingWindow(1000);
    for (const [at, label] of [
      [0, 'a'],
      [500, 'b'],
      [1400, 'c'],
      [1600, 'd'],
      [1700, 'e'],
      [3000, 'f'],
    ] as const)
      w.record(at, label);
    assert.equal(w.max, 3);
    assert.deepEqual(w.worst, [
      { at: 1400, label: 'c' },
      { at: 1600, label: 'd' },
      { at: 1700, label: 'e' },
    ]);
  });
});

describe('sends beside arrivals', () => {
  test('densest counts a half-open window', () => {
    assert.equal(densest([0, 999, 1000, 1999], 1000), 2);
    assert.equal(densest([0, 999, 1000, 1998], 1000), 3);
    assert.equal(densest([0, 500, 999], 1000), 3);
    assert.equal(densest([], 1000), 0);
  });

  test('sends that hold the promise, read at once: no problem', () => {
    const sent = sends(30, 105);
    const verdict = judgeArrivals(
      group(sent, () => 2),
      sent,
      10,
    );
    assert.equal(verdict.densestSends, 10);
    assert.deepEqual(verdict.problems, []);
  });

  test('eleven sends within 1020 ms break the promise, however they were read', () => {
    const sent = sends(11, 101);
    const verdict = judgeArrivals(
      group(sent, () => 0),
      sent,
      10,
    );
    assert.equal(verdict.densestSends, 11);
    assert.match(verdict.problems.join('\n'), /11 calls were sent within 1020 ms/);
  });

  test('a count above the budget from calls read late is the reader’s, not the limiter’s', () => {
    // Two batches of 10, 1 100 ms apart: the first read 150 ms late puts 20 in one second.
    const sent = [...sends(10, 1), ...sends(10, 1, T0 + 1100).map((s) => ({ ...s, call: `d${s.call}` }))];
    const stats = group(sent, (i) => (i < 10 ? 150 : 1));
    assert.equal(stats.maxPerSecond, 20);
    const verdict = judgeArrivals(stats, sent, 10);
    assert.equal(verdict.busiestReadOnTime, 10);
    assert.deepEqual(verdict.problems, []);
  });

  test('a count above the budget that reads within the allowance also give is the limiter’s', () => {
    // Ten at once and one 990 ms later, each read 5 ms after its send: 11 in one second however
    // promptly the simulator read them.
    const sent = [...sends(10, 1), { call: 'last', at: T0 + 990 }];
    const verdict = judgeArrivals(
      group(sent, () => 5),
      sent,
      10,
    );
    assert.equal(verdict.busiestReadOnTime, 11);
    assert.equal(verdict.problems.length, 2, verdict.problems.join('\n'));
    assert.match(verdict.problems[1]!, /saw 11 calls in one second \(limit 10\), 11 of them even if each was read within 20 ms/);
  });

  test('a call the simulator saw that no caller sent is reported', () => {
    const sent = sends(3, 400);
    const stats = group(sent, () => 1);
    const verdict = judgeArrivals(stats, sent.slice(1), 10);
    assert.match(verdict.problems.join('\n'), /no caller sent: c0/);
  });
});
