/** The dashboard's history: ring buffer, sampler rounds, window, accounts coming and going. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SampleRing, type StatusSample } from '../../src/dashboard/history.js';
import { StatusSampler, type StatusSource } from '../../src/dashboard/sampler.js';
import { runUrlPrefix, workflowListUrl } from '../../src/dashboard/temporalLinks.js';

const sample = (t: number, callsPerSec = 1): StatusSample => ({
  t,
  callsPerSec,
  groups: [{ name: 'main', used: callsPerSec, effective: 10, configured: 10 }],
  latenessP50: 5,
  latenessP99: 50,
  inflight: 2,
  priority: 0,
  normal: 10,
  dueNow: 1,
  stretchFactor: 1,
});

/** A source whose accounts and answers the test sets; `sample` fails for ids in `failing`. */
function fakeSource(): StatusSource & { ids: string[]; failing: Set<string>; calls: number } {
  const source = {
    ids: ['1', '2'],
    failing: new Set<string>(),
    calls: 0,
    async carrierIds() {
      return [...source.ids];
    },
    async sample(carrierId: string, now: number) {
      source.calls += 1;
      if (source.failing.has(carrierId)) throw new Error(`status of ${carrierId} failed`);
      return sample(now, Number(carrierId));
    },
  };
  return source;
}

test('ring keeps the newest samples in order and filters by time', () => {
  const ring = new SampleRing(3);
  assert.deepEqual(ring.since(), []);
  for (const t of [10, 20, 30, 40, 50]) ring.push(sample(t));
  assert.deepEqual(
    ring.since().map((s) => s.t),
    [30, 40, 50],
  );
  assert.deepEqual(
    ring.since(30).map((s) => s.t),
    [40, 50],
  );
  assert.deepEqual(ring.since(50), []);
  assert.throws(() => new SampleRing(0), RangeError);
});

test('each round samples every account; history answers the window and what is newer than since', async () => {
  let now = 1_000_000;
  const source = fakeSource();
  const sampler = new StatusSampler(source, { everyMs: 5000, windowMs: 15_000, idleAfterMs: 60_000, now: () => now });
  for (let i = 0; i < 5; i += 1) {
    await sampler.tick();
    now += 5000;
  }
  const history = sampler.history();
  assert.equal(history.sampleEveryMs, 5000);
  assert.equal(history.windowMs, 15_000);
  assert.deepEqual(Object.keys(history.carriers).sort(), ['1', '2']);
  // Rounds at +0 … +20 s; now is +25 s: the 15 s window keeps +15 s and +20 s (the ring holds 3).
  assert.deepEqual(
    history.carriers['1']!.map((s) => s.t - 1_000_000),
    [15_000, 20_000],
  );
  assert.deepEqual(
    history.carriers['2']!.map((s) => s.callsPerSec),
    [2, 2],
  );
  assert.deepEqual(
    sampler.history(1_000_000 + 15_000).carriers['1']!.map((s) => s.t - 1_000_000),
    [20_000],
  );
});

test('a failing account keeps its old samples and does not stop the others; a removed account is dropped', async () => {
  let now = 0;
  const source = fakeSource();
  const errors: (string | undefined)[] = [];
  const sampler = new StatusSampler(source, {
    everyMs: 1000,
    windowMs: 60_000,
    idleAfterMs: 60_000,
    now: () => now,
    onError: (_error, carrierId) => errors.push(carrierId),
  });
  await sampler.tick();
  now = 1000;
  source.failing.add('1');
  await sampler.tick();
  assert.deepEqual(errors, ['1']);
  assert.equal(sampler.history().carriers['1']!.length, 1);
  assert.equal(sampler.history().carriers['2']!.length, 2);
  source.ids = ['2', '3'];
  now = 2000;
  await sampler.tick();
  assert.deepEqual(Object.keys(sampler.history().carriers).sort(), ['2', '3']);
});

test('sampling starts when the history is wanted, takes a first sample at once, and stop waits for the round', async () => {
  const source = fakeSource();
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const slow: StatusSource = {
    carrierIds: () => source.carrierIds(),
    async sample(carrierId, now) {
      await gate;
      return source.sample(carrierId, now);
    },
  };
  const sampler = new StatusSampler(slow, { everyMs: 60_000, windowMs: 600_000, idleAfterMs: 600_000 });
  assert.equal(source.calls, 0, 'nothing sampled before anyone asks');
  sampler.want();
  sampler.want();
  const stopped = sampler.stop();
  let done = false;
  void stopped.then(() => (done = true));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(done, false, 'stop waits for the round in progress');
  release();
  await stopped;
  assert.equal(source.calls, 2, 'one round over two accounts, not two overlapping rounds');
  assert.equal(sampler.history().carriers['1']!.length, 1);
  sampler.want();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(source.calls, 2, 'a stopped sampler stays stopped');
});

test('Web UI links: the workflow list filtered by the card workflow id, and one run', () => {
  assert.equal(
    workflowListUrl('http://127.0.0.1:8233/', 'default', 'p-card-42'),
    'http://127.0.0.1:8233/namespaces/default/workflows?query=WorkflowId%3D%22p-card-42%22',
  );
  assert.equal(runUrlPrefix('http://ui.example:8080', 'polling ns', 'card-7'), 'http://ui.example:8080/namespaces/polling%20ns/workflows/card-7/');
});
