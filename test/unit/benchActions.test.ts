import { test } from 'node:test';
import assert from 'node:assert/strict';
import proto from '@temporalio/proto';
import { countEvents, type HistoryEvent } from '../../bench/lib/actions.js';
import { rssTrends, type RssSample } from '../../bench/lib/rss.js';
import { threadHeapsOf } from '../../bench/lib/isolateHeaps.js';
import { parseGoHeap } from '../../bench/lib/goHeap.js';

// Synthetic histories: only the attributes countEvents reads, at the given times (ms).
const event = (ms: number, attributes: Record<string, unknown>): HistoryEvent =>
  proto.temporal.api.history.v1.HistoryEvent.fromObject({ eventTime: { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 }, ...attributes });
const started = (ms = 0): HistoryEvent => event(ms, { workflowExecutionStartedEventAttributes: {} });
const scheduled = (ms: number): HistoryEvent => event(ms, { workflowTaskScheduledEventAttributes: { startToCloseTimeout: { seconds: 10 } } });
const taskStarted = (ms: number): HistoryEvent => event(ms, { workflowTaskStartedEventAttributes: {} });
const completed = (ms: number): HistoryEvent => event(ms, { workflowTaskCompletedEventAttributes: {} });
const marker = (ms: number, taskId = 4): HistoryEvent => event(ms, { markerRecordedEventAttributes: { workflowTaskCompletedEventId: taskId } });
const timerFired = (ms: number): HistoryEvent => event(ms, { timerFiredEventAttributes: {} });
const done = (ms: number): HistoryEvent => event(ms, { workflowExecutionCompletedEventAttributes: {} });
const task = (from: number, to: number): HistoryEvent[] => [scheduled(from), taskStarted(from), completed(to)];

test('actions: a run whose local activities all complete in one workflow task costs its start and one action for them all', () => {
  const counts = countEvents([started(), ...task(0, 100), marker(100), marker(100), marker(100), marker(100), done(100)]);
  assert.equal(counts.actions, 2);
  assert.deepEqual(counts.actionsByKind, { 'workflow started': 1, 'local activities (one per workflow task)': 1 });
  assert.equal(counts.localActivities, 4);
  assert.equal(counts.workflowTaskHeartbeats, 0);
});

test('actions: a workflow task extended by a heartbeat (long task, a new one right after its own commands) costs one more', () => {
  const events = [started(), ...task(0, 8500), marker(8500), ...task(8500, 9000), marker(9000), done(9000)];
  const counts = countEvents(events);
  assert.equal(counts.workflowTaskHeartbeats, 1);
  assert.deepEqual(counts.actionsByKind, { 'workflow started': 1, 'workflow task heartbeat': 1, 'local activities (one per workflow task)': 1 });
  // The same history with a short first task: the second task came from the timer, not a heartbeat.
  const woken = countEvents([started(), ...task(0, 100), marker(100), timerFired(900), ...task(900, 950), marker(950), done(950)]);
  assert.equal(woken.workflowTaskHeartbeats, 0);
  assert.equal(woken.actionsByKind['local activities (one per workflow task)'], 2);
});

test('actions: local activities of two runs read one after the other count per run, even with the same task event ids', () => {
  const run = (t: number): HistoryEvent[] => [started(t), ...task(t, t + 50), marker(t + 50, 4), marker(t + 50, 4), done(t + 50)];
  const counts = countEvents([...run(0), ...run(1000)]);
  assert.equal(counts.actionsByKind['local activities (one per workflow task)'], 2);
  assert.equal(counts.actions, 4);
});

test('actions: workflow task failures by cause and timeouts are counted, not billed', () => {
  const failed = event(50, { workflowTaskFailedEventAttributes: { cause: 1 } });
  const timedOut = event(70, { workflowTaskTimedOutEventAttributes: {} });
  const counts = countEvents([started(), scheduled(0), taskStarted(0), failed, scheduled(60), taskStarted(60), timedOut, ...task(80, 90), done(90)]);
  assert.equal(counts.workflowTaskFailures, 1);
  assert.deepEqual(counts.workflowTaskFailureCauses, { UNHANDLED_COMMAND: 1 });
  assert.equal(counts.workflowTaskTimeouts, 1);
  assert.equal(counts.actions, 1);
});

test('rss: a process that keeps growing does not level off; one that stops growing does', () => {
  const samples: RssSample[] = Array.from({ length: 12 }, (_, i) => ({ at: i * 10_000, mb: { growing: 500 + 40 * i, flat: 500 + (i < 6 ? 40 * i : 200) } }));
  const trends = Object.fromEntries(rssTrends(samples).map((t) => [t.process, t]));
  assert.equal(trends.growing?.levelsOff, false);
  assert.equal(trends.flat?.levelsOff, true);
  assert.ok((trends.growing?.secondHalfMb ?? 0) > 100);
});

test('rss: resident memory that grows while live memory stays flat is heap sizing; growing live memory is not', () => {
  const samples: RssSample[] = Array.from({ length: 12 }, (_, i) => ({
    at: i * 10_000,
    mb: { sizing: 100 + 5 * i, leak: 100 + 5 * i, unknown: 100 + 5 * i },
    liveMb: { sizing: 40 + (i % 2), leak: 40 + 3 * i },
  }));
  const trends = Object.fromEntries(rssTrends(samples, ['sizing', 'leak', 'unknown']).map((t) => [t.process, t]));
  assert.equal(trends.sizing?.levelsOff, true);
  assert.equal(trends.sizing?.decidedBy, 'live memory');
  assert.equal(trends.leak?.levelsOff, false, 'live memory grew 18 MB in the second half');
  assert.equal(trends.unknown?.levelsOff, false, 'no live figure: the RSS rule alone (30 MB in the second half)');
  assert.equal(trends.unknown?.live, null);
});

test('rss: live memory alone does not decide for a process not named that does not report its heaps (its native memory is in neither figure)', () => {
  const samples: RssSample[] = Array.from({ length: 12 }, (_, i) => ({ at: i * 10_000, mb: { workers: 100 + 5 * i }, liveMb: { workers: 40 } }));
  const [workers] = rssTrends(samples, ['simulator']);
  assert.equal(workers?.levelsOff, false);
  assert.equal(workers?.decidedBy, 'rss');
  assert.deepEqual(workers?.live, { startMb: 40, middleMb: 40, endMb: 40, secondHalfMb: 0 });
});

test('rss: a process with memory outside its heaps levels off when its live memory and that memory do, not when that memory keeps growing', () => {
  const samples: RssSample[] = Array.from({ length: 12 }, (_, i) => ({
    at: i * 10_000,
    mb: { sizing: 300 + 10 * i, native: 300 + 10 * i },
    heapMb: { sizing: 200 + 10 * i, native: 200 },
    // A heap-in-use figure sampled between collections: its floor is what is kept.
    liveMb: { sizing: 80 + (i % 3) * 10, native: 80 + (i % 3) * 10 },
  }));
  const trends = Object.fromEntries(rssTrends(samples, ['simulator']).map((t) => [t.process, t]));
  assert.equal(trends.sizing?.levelsOff, true);
  assert.equal(trends.sizing?.decidedBy, 'live memory and memory outside the heaps');
  assert.deepEqual(trends.sizing?.live, { startMb: 80, middleMb: 80, endMb: 80, secondHalfMb: 0 });
  assert.equal(trends.native?.levelsOff, false, 'memory outside the heaps grew 40 MB in the second half after 50');
  assert.equal(trends.native?.outsideHeaps?.secondHalfMb, 40);
});

test('isolate heaps: a diagnostic report’s worker threads are summed, their young generations left out', () => {
  const report = {
    javascriptHeap: { usedMemory: 999, totalCommittedMemory: 999 },
    workers: [
      {
        javascriptHeap: {
          usedMemory: 50,
          totalMemory: 120,
          totalCommittedMemory: 100,
          heapSpaces: { new_space: { used: 8 }, new_large_object_space: { used: 2 }, old_space: { used: 30 } },
        },
      },
      { javascriptHeap: { usedMemory: 20, totalCommittedMemory: 60, heapSpaces: {} } },
    ],
  };
  assert.deepEqual(threadHeapsOf(report), { threads: 2, usedBytes: 60, physicalBytes: 160 });
  assert.deepEqual(threadHeapsOf({}), { threads: 0, usedBytes: 0, physicalBytes: 0 });
});

test('go heap: the dev server’s /metrics give its heap objects and what the heap holds; a text without them gives null', () => {
  const text = [
    '# HELP memory_heap memory_heap gauge',
    'memory_heap{service_name="frontend"} 2.28e+08',
    'memory_heap{service_name="history"} 9e+08',
    'memory_heapinuse{service_name="frontend"} 3.7e+08',
    'memory_heapidle{service_name="frontend"} 1.7e+08',
    'memory_heapreleased{service_name="frontend"} 9e+07',
    'memory_stack{service_name="frontend"} 3e+07',
    'memory_heap_objects{service_name="frontend"} 2.6e+06',
  ].join('\n');
  assert.deepEqual(parseGoHeap(text), { allocatedBytes: 2.28e8, heldBytes: 3.7e8 + 1.7e8 - 9e7 + 3e7 });
  assert.equal(parseGoHeap('memory_heap{service_name="frontend"} 1\n'), null);
});
