import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { getPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTestRedis, type TestRedis } from '../../testkit/redis.js';
import { loadConfig } from '../../src/config/index.js';
import { DEFAULT_WINDOW_MARGIN_MS, RedisRateLimiter } from '../../src/ratelimit/limiter.js';
import { ARRIVAL_ALLOWANCE_MS, MARGIN_HEADROOM, MAX_WINDOW_MARGIN_MS, MIN_WINDOW_MARGIN_MS, SendDelays } from '../../src/ratelimit/sendDelay.js';
import { startSimulatorProcess, type SimulatorProcess } from '../../src/simulator/childProcess.js';
import { GatewayClient } from '../../src/gateway/client.js';
import { GatewayError } from '../../src/gateway/errors.js';
import { callThroughLimiter } from '../../src/gateway/limitedCall.js';
import { configureAccount, groupStats, simStats } from './simHelpers.js';
import { judgeArrivals, RecordingClient } from './arrivals.js';
import type { CallerInput, CallerOutput } from './fixtures/limiterCaller.js';
import { typescriptExecArgv } from '../../src/runtime/typescriptChild.js';

const WINDOW_MS = 1000 + DEFAULT_WINDOW_MARGIN_MS;

describe('rate limiter script (test clock)', () => {
  let t: TestRedis;
  let clock = 1_000_000;
  const limiter = (qps: number): RedisRateLimiter => new RedisRateLimiter({ redis: t.redis, namespace: t.namespace, qps: () => qps, now: () => clock });
  before(async () => {
    t = await createTestRedis('ratelimit-unit');
  });
  after(async () => t.close());

  test('grants the QPS within a window, then says exactly when the next slot frees', async () => {
    const l = limiter(3);
    clock = 1_000_000;
    for (let i = 0; i < 3; i += 1) {
      clock += 10;
      assert.equal((await l.tryAcquire('c1', 'g')).granted, true);
    }
    assert.deepEqual(await l.remaining('c1', ['g', 'other']), { g: 0, other: 3 });
    clock += 100;
    const refused = await l.tryAcquire('c1', 'g');
    assert.equal(refused.granted, false);
    // First grant at 1_000_010 leaves the window at 1_000_010 + 1040.
    assert.equal(refused.waitMs, 1_000_010 + WINDOW_MS - clock);
    clock = 1_000_010 + WINDOW_MS;
    assert.equal((await l.tryAcquire('c1', 'g')).granted, true);
    assert.equal((await l.tryAcquire('c1', 'g')).granted, false);
  });

  test('no sliding window ever holds more grants than the QPS (random clock walk)', async () => {
    const l = limiter(5);
    clock = 2_000_000;
    const grants: number[] = [];
    let seed = 7;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    for (let i = 0; i < 400; i += 1) {
      clock += Math.floor(random() * 60);
      if ((await l.tryAcquire('c2', 'g')).granted) grants.push(clock);
    }
    let max = 0;
    for (let i = 0; i < grants.length; i += 1) {
      let j = i;
      while (j < grants.length && (grants[j] ?? 0) - (grants[i] ?? 0) < WINDOW_MS) j += 1;
      max = Math.max(max, j - i);
    }
    assert.equal(max, 5);
    // ~12 s of clock at 5 per 1.04 s: the limiter must also not starve the group.
    const span = (grants.at(-1) ?? 0) - (grants[0] ?? 0);
    assert.ok(grants.length >= Math.floor((span / WINDOW_MS) * 5), `${grants.length} grants over ${span} ms`);
  });

  test('limiters with different margins share a group: no carrier window can hold more than the QPS (random walk with reservations)', async () => {
    const rate = 4;
    // Two processes: one sends within 10 ms of its slots, one within 100 ms.
    const tight = new RedisRateLimiter({ redis: t.redis, namespace: t.namespace, qps: () => rate, now: () => clock, windowMarginMs: MIN_WINDOW_MARGIN_MS });
    const loose = new RedisRateLimiter({ redis: t.redis, namespace: t.namespace, qps: () => rate, now: () => clock, windowMarginMs: 100 });
    clock = 5_000_000;
    // A call reaches the carrier somewhere in [slot, slot + margin].
    const calls: { slot: number; end: number }[] = [];
    let seed = 11;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    for (let i = 0; i < 600; i += 1) {
      clock += Math.floor(random() * 80);
      const [limiter, margin] = random() < 0.5 ? [tight, MIN_WINDOW_MARGIN_MS] : [loose, 100];
      const attempt = await limiter.tryAcquire('mix', 'g', random() < 0.3 ? Math.floor(random() * 1500) : 0);
      if (attempt.granted) calls.push({ slot: clock + attempt.waitMs, end: clock + attempt.waitMs + margin });
    }
    // Worst case over arrivals: the most calls whose intervals all meet one 1000 ms window, which
    // starts at some call's latest arrival.
    let worst = 0;
    for (const first of calls) {
      worst = Math.max(worst, calls.filter((c) => c.end >= first.end && c.slot < first.end + 1000).length);
    }
    assert.equal(worst, rate);
    const span = Math.max(...calls.map((c) => c.slot)) - Math.min(...calls.map((c) => c.slot));
    // Not starved either: the mean window length stays near 1000 + the mean margin.
    assert.ok(calls.length >= Math.floor((span / 1100) * rate), `${calls.length} grants over ${span} ms`);
  });

  test('pushback: pause, halve, ignore the same burst, recover fast to below the refused rate, then probe slowly', async () => {
    const l = limiter(10);
    clock = 3_000_000;
    assert.equal(await l.effectiveRate('c3', 'g'), 10);
    const first = await l.reportRateLimited('c3', 'g', 500);
    assert.deepEqual(first, { applied: true, effectiveRate: 5, pausedUntilMs: 3_000_500 });
    const sameBurst = await l.reportRateLimited('c3', 'g', 500);
    assert.equal(sameBurst.applied, false);
    assert.equal(await l.effectiveRate('c3', 'g'), 5);
    const paused = await l.tryAcquire('c3', 'g');
    assert.equal(paused.granted, false);
    assert.equal(paused.waitMs, 500);
    assert.deepEqual(await l.remaining('c3', ['g']), { g: 0 });
    // Fast recovery: +1 per second after the pause, up to the refused rate − 1 = 9.
    clock = 3_000_500 + 999;
    assert.equal(await l.effectiveRate('c3', 'g'), 5);
    clock = 3_000_500 + 1000;
    assert.equal(await l.effectiveRate('c3', 'g'), 6);
    clock = 3_000_500 + 4000;
    assert.equal(await l.effectiveRate('c3', 'g'), 9);
    clock = 3_000_500 + 20_000;
    assert.equal(await l.effectiveRate('c3', 'g'), 9, 'probing above the refused rate waits for the probe step');
    clock = 3_000_500 + 4000 + 30_000;
    assert.equal(await l.effectiveRate('c3', 'g'), 10);
    // Back at the configured rate with the state gone; a new rejection halves again.
    assert.equal(await t.redis.exists(`${t.namespace}poll:{cc3}:rl:g:pushback`), 0);
    clock += 5000;
    assert.equal((await l.reportRateLimited('c3', 'g')).effectiveRate, 5);
  });

  test('a rejected probe lowers the ceiling: recovery then stops one below it', async () => {
    const l = limiter(10);
    clock = 4_000_000;
    await l.reportRateLimited('c4', 'g', 0); // refused at 10 → 5
    clock += 2000; // 7
    assert.equal(await l.effectiveRate('c4', 'g'), 7);
    assert.equal((await l.reportRateLimited('c4', 'g', 0)).effectiveRate, 3); // refused at 7 → 3
    clock += 3000;
    assert.equal(await l.effectiveRate('c4', 'g'), 6);
    clock += 10_000;
    assert.equal(await l.effectiveRate('c4', 'g'), 6, 'stays below the refused rate until the probe step');
  });
});

describe('rate limiter wait mode (Redis clock)', () => {
  let t: TestRedis;
  before(async () => {
    t = await createTestRedis('ratelimit-wait');
  });
  after(async () => t.close());

  test('the margin follows the 99th percentile of recent grant-to-send delays with headroom, plus the arrival allowance, within [floor, 100] ms', () => {
    let now = 1_000_000;
    const delays = new SendDelays({ size: 200, now: () => now });
    assert.equal(delays.marginMs(), MAX_WINDOW_MARGIN_MS, 'the cap until anything is measured');
    for (let i = 0; i < 198; i += 1) delays.record(2);
    delays.record(60);
    delays.record(70);
    assert.equal(delays.marginMs(), MIN_WINDOW_MARGIN_MS, '1 % outliers do not widen it; 2 × 1.5 ms + the allowance is below the floor');
    for (let i = 0; i < 10; i += 1) delays.record(30);
    assert.equal(delays.marginMs(), 30 * MARGIN_HEADROOM + ARRIVAL_ALLOWANCE_MS);
    for (let i = 0; i < 50; i += 1) delays.record(400);
    assert.equal(delays.marginMs(), 30 * MARGIN_HEADROOM + ARRIVAL_ALLOWANCE_MS, 'stalls beyond the cap are no measure of the margin');
    for (let i = 0; i < 200; i += 1) delays.record(99);
    assert.equal(delays.marginMs(), MAX_WINDOW_MARGIN_MS);
    // A slow start is forgotten once it is older than the horizon (5 s).
    now += 6000;
    for (let i = 0; i < 10; i += 1) delays.record(12);
    assert.equal(delays.marginMs(), 12 * MARGIN_HEADROOM + ARRIVAL_ALLOWANCE_MS);
  });

  test('short deadlines give deferrals (counted), longer ones wait for the next window', async () => {
    const l = new RedisRateLimiter({ redis: t.redis, namespace: t.namespace, qps: () => 5 });
    const short = await Promise.all(Array.from({ length: 20 }, () => l.acquire('w1', 'g', { deadline: Date.now() + 200 })));
    assert.equal(short.filter((r) => r.outcome === 'granted').length, 5);
    const deferred = short.filter((r) => r.outcome === 'deferred');
    assert.equal(deferred.length, 15);
    // Answered at once, not after sleeping to the deadline: no caller waited.
    assert.equal(l.stats().waits, 0, 'a deferred caller slept');
    assert.deepEqual({ granted: l.stats().granted, deferred: l.stats().deferred }, { granted: 5, deferred: 15 });

    // Five of eight callers get the next window's slots: it opens one window after the first
    // grants, within their 1.5 s deadline (the one after it would not: two windows are 2.08 s).
    const long = await Promise.all(Array.from({ length: 8 }, () => l.acquire('w1', 'g', { deadline: Date.now() + 1500 })));
    const granted = long.filter((r) => r.outcome === 'granted');
    assert.equal(granted.length, 5);
    for (const r of granted) assert.ok(r.waitedMs >= 700, `waited ${r.waitedMs} ms for the next window`);
    assert.ok(l.stats().waits >= 5, 'waiting callers slept between attempts');
  });

  test('carrier pushback voids reservations; their holders re-acquire at the reduced rate', async () => {
    const l = new RedisRateLimiter({ redis: t.redis, namespace: t.namespace, qps: () => 2 });
    const key = `${t.namespace}poll:{cw3}:rl:g`;
    for (let i = 0; i < 2; i += 1) assert.equal((await l.acquire('w3', 'g', { deadline: Date.now() + 100 })).outcome, 'granted');
    const pending = l.acquire('w3', 'g', { deadline: Date.now() + 3000 });
    await sleep(50);
    assert.equal(await t.redis.zcard(key), 3, 'a slot ahead is reserved');
    assert.equal((await l.reportRateLimited('w3', 'g', 200)).applied, true);
    assert.equal(await t.redis.zcard(key), 2, 'the reservation made at the old rate is void');
    assert.equal((await pending).outcome, 'granted');
    assert.equal(await l.effectiveRate('w3', 'g'), 1);
  });

  test("a cancelled wait rejects with the caller's reason", async () => {
    const l = new RedisRateLimiter({ redis: t.redis, namespace: t.namespace, qps: () => 1 });
    assert.equal((await l.acquire('w2', 'g', { deadline: Date.now() + 100 })).outcome, 'granted');
    const controller = new AbortController();
    const reason = new Error('activity cancelled');
    setTimeout(() => controller.abort(reason), 50);
    await assert.rejects(l.acquire('w2', 'g', { deadline: Date.now() + 5000, signal: controller.signal }), (error) => error === reason);
  });
});

describe('rate limiter across processes and carrier pushback (simulator)', () => {
  let t: TestRedis;
  let sim: SimulatorProcess;
  before(async () => {
    t = await createTestRedis('ratelimit-sim');
    // In a process of its own: it stamps arrivals on its own clock, not on this process' loop (the callers of the pushback tests run here).
    sim = await startSimulatorProcess({ seed: 42, logLevel: 'warn' });
  });
  after(async () => {
    await sim.close();
    await t.close();
  });

  test('the simulator, the instrument, runs ahead of its callers in CPU priority where that is allowed (root)', () => {
    assert.equal(getPriority(sim.pid), process.getuid?.() === 0 ? -10 : 0);
  });

  test('4 processes × 50 callers on one 10-QPS group for 10 s: never 11 sent within 1 020 ms, the simulator above 10 in a second only by reading calls late, the rate reached reported', async () => {
    const qps = 10;
    const durationMs = 10_000;
    const account = 'acct-multi';
    await configureAccount(sim.url, account, { groups: { g: qps }, typeGroups: { card_status: 'g' }, latencyMs: { p50: 20, p99: 80 } });
    const fixture = fileURLToPath(new URL('./fixtures/limiterCaller.ts', import.meta.url));
    const children = [0, 1, 2, 3].map((processIndex) => {
      const input: CallerInput = {
        redisUrl: loadConfig().REDIS_URL,
        namespace: t.namespace,
        carrierId: 'multi',
        group: 'g',
        qps,
        simUrl: sim.url,
        account,
        processIndex,
        concurrency: 50,
        durationMs,
        maxWaitMs: 1500,
        redueMs: 1000,
      };
      return spawnCaller(fixture, input);
    });
    await Promise.all(children.map((child) => child.ready));
    // A common start shortly ahead, so no process starts with a head start over the others.
    const startAt = Date.now() + 200;
    for (const child of children) child.start(startAt);
    const outputs = await Promise.all(children.map((child) => child.output));
    const stats = (await simStats(sim.url)).accounts[account]?.groups['g'];
    assert.ok(stats, 'the simulator counted the group');
    const ok = outputs.reduce((sum, o) => sum + o.ok, 0);
    const deferred = outputs.reduce((sum, o) => sum + o.deferred, 0);
    const errors: Record<string, number> = {};
    for (const o of outputs) for (const [key, n] of Object.entries(o.errors)) errors[key] = (errors[key] ?? 0) + n;
    const arrivals = judgeArrivals(
      stats,
      outputs.flatMap((o) => o.sends),
      qps,
    );
    // Steady-state rate: the time between a call and the one `qps` calls later is the length the
    // limiter really gives a window (1000 ms + its margin). Counting calls in the run instead
    // depends on how many whole windows happen to fit in it (10 s held exactly 10 of 1.1 s).
    // The first 2 s are warm-up. The median is the window the limiter gives (a fixed 100 ms
    // margin: 1100 ms, 91 %); the mean also pays for delay spikes on this shared machine (margin
    // briefly wider, a late batch's slots lost), so it gets a lower bar.
    const all = outputs.flatMap((o) => o.sentAt).sort((a, b) => a - b);
    const sent = all.filter((at) => at >= all[0]! + 2000);
    const spacings: number[] = [];
    for (let i = 0; i + qps < sent.length; i += 1) spacings.push(sent[i + qps]! - sent[i]!);
    spacings.sort((a, b) => a - b);
    const medianWindowMs = spacings[Math.floor(spacings.length / 2)]!;
    const meanWindowMs = spacings.reduce((a, b) => a + b, 0) / spacings.length;
    const report = {
      maxPerSecond: stats.maxPerSecond,
      calls: stats.calls,
      rejected: stats.rejected,
      ok,
      errors,
      deferred,
      densestSends: arrivals.densestSends,
      busiestReadOnTime: arrivals.busiestReadOnTime,
      busiestReadAfterMs: arrivals.busiest.map((b) => b.readAfterMs),
      medianWindowMs,
      meanWindowMs: Math.round(meanWindowMs),
      utilisation: 1000 / medianWindowMs,
      meanUtilisation: 1000 / meanWindowMs,
      limiters: outputs.map((o) => o.limiter),
    };
    process.stdout.write(`# multi-process limiter: ${JSON.stringify(report)}\n`);
    for (const o of outputs) assert.ok(o.runMs >= durationMs, `process ${o.processIndex} stopped after ${o.runMs} ms`);
    // What the limiter decided (the sends) holds its promise, and the simulator counted more than
    // the budget in a second only by reading calls late (its event loop shares these two cores;
    // CI saw 12–20 in a second beside the whole suite): see ./arrivals.ts.
    assert.deepEqual(arrivals.problems, []);
    // Refusals are the simulator's count above the budget: there only as far as it read late.
    assert.equal(errors['rate_limited'] ?? 0, stats.rejected);
    assert.deepEqual(
      Object.keys(errors).filter((key) => key !== 'rate_limited'),
      [],
      `errors: ${JSON.stringify(errors)}`,
    );
    assert.equal(stats.calls, ok, 'every call sent and accepted reached the simulator, nothing else did');
    // Enough calls for a second above the limit to be possible: more than one window's worth, and
    // callers waited for slots (deferrals below), so demand was above what the limiter granted.
    assert.ok(sent.length > 2 * qps, `${sent.length} calls after warm-up`);
    // The share of the rate the four processes reach (utilisation, meanUtilisation above) depends on
    // them getting the CPU when their slots come, so it is reported, not asserted: a rate is a
    // benchmark's figure (the suite saw 91–96 % here with other test files on the same two cores).
    assert.ok(deferred > 0, 'waits beyond the deadline are reported as deferrals');
  });

  test('a granted call that cannot be sent within its slot (queued behind a slow call for a socket) goes back to the limiter', async () => {
    const qps = 5;
    await configureAccount(sim.url, 'acct-slow', { groups: { g: 100 }, typeGroups: { card_status: 'g' }, latencyMs: { p50: 1200, p99: 1200 } });
    await configureAccount(sim.url, 'acct-queued', { groups: { g: 100 }, typeGroups: { card_status: 'g' }, latencyMs: { p50: 2, p99: 5 } });
    const limiter = new RedisRateLimiter({ redis: t.redis, namespace: t.namespace, qps: () => qps });
    // One socket: every call waits for the slow one, long after its slot was granted.
    const client = new RecordingClient({ baseUrl: sim.url, maxSockets: 1 }, 'acct-queued');
    const call = (account: string, index: number): ReturnType<typeof callThroughLimiter<'card_status'>> =>
      callThroughLimiter(
        { client, limiter },
        {
          carrierId: 'queued',
          group: 'g',
          type: 'card_status',
          account,
          iccid: `89862000${String(index).padStart(12, '0')}`,
          // Generous: a call deferred for want of time before its deadline is the limiter doing its job,
          // not what this test is about (CI on a loaded, slower machine saw the last one deferred at 8 s).
          deadline: Date.now() + 30_000,
          callReserveMs: 3000,
        },
      );
    try {
      const slow = call('acct-slow', 0);
      await sleep(30);
      const queued = await Promise.all(Array.from({ length: 9 }, (_, i) => call('acct-queued', i + 1)));
      assert.equal((await slow).outcome, 'ok');
      const stats = (await simStats(sim.url)).accounts['acct-queued']?.groups['g'];
      assert.ok(stats, 'the simulator counted the group');
      const arrivals = judgeArrivals(stats, client.sends, qps);
      process.stdout.write(`# queued behind a slow call: ${JSON.stringify({ stats, arrivals, limiter: limiter.stats() })}\n`);
      assert.deepEqual(
        queued.map((r) => r.outcome),
        Array.from({ length: 9 }, () => 'ok'),
      );
      assert.equal(stats.calls, 9);
      // Granted calls released at once by the slow call's socket would be sent together.
      assert.deepEqual(arrivals.problems, []);
      assert.ok(limiter.stats().lateSlots > 0, 'late calls gave their slots back');
    } finally {
      client.close();
    }
  });

  test('carrier enforces 6 QPS while configured 10: rejections stop and the limiter settles at the carrier’s rate (6, or 5 after a late arrival refused at 6)', async () => {
    const account = 'acct-pushback';
    await configureAccount(sim.url, account, { groups: { g: 6 }, typeGroups: { card_status: 'g' }, latencyMs: { p50: 10, p99: 40 } });
    const limiter = new RedisRateLimiter({ redis: t.redis, namespace: t.namespace, qps: () => 10 });
    const client = new GatewayClient({ baseUrl: sim.url });
    // Settled = the rate stayed the same, at most 6, with no rejection for `quietMs` (recovery climbs
    // +1 QPS per second and stops at the refused rate − 1, so a rate that holds is where it stopped).
    // AIMD reaches it after a few rejections (each a halving and a climb): ~10 s on a quiet machine,
    // longer under load (CI once saw a rejection 10 s in), so it is waited for. Where it stops is 6
    // when the carrier refused only beyond 6; a call this process wrote on time but that reached the
    // carrier late (this process or the carrier starved of CPU) can make 7 arrivals of one carrier
    // second at 6 QPS, and the limiter then rightly stops at 5 (the cluster suite in CI, 2026-12-05:
    // rejections had stopped, the rate never came back to 6).
    // A rejection after settling starts the settling again (the limiter answers it: 6 → 5), within
    // the same 60 s: beside two busy-looping processes (CI, 2026-12-05 run 34) one late arrival was
    // refused 0.5 s into the quiet window at 6 and the limiter settled at 5. What the test asserts is
    // that rejections stop (a whole quiet window is reached in time) and where the limiter stops.
    const settleLimitMs = 60_000;
    const quietMs = 2500;
    const measureMs = 10_000;
    const start = Date.now();
    let end = start + settleLimitMs + measureMs;
    let settled: { calls: number; rejected: number } | undefined;
    let resettled = 0;
    const snapshot = (async () => {
      let rejected = -1;
      let heldRate = -1;
      let quietSince = Date.now();
      while (Date.now() < end) {
        await sleep(250);
        const now = groupStats(await simStats(sim.url), account, 'g');
        const rate = await limiter.effectiveRate('pb', 'g');
        if (now.rejected !== rejected || rate !== heldRate || rate > 6) {
          [rejected, heldRate, quietSince] = [now.rejected, rate, Date.now()];
          if (settled !== undefined) {
            // The quiet window was broken: settle again, if there is time left.
            settled = undefined;
            resettled += 1;
            end = start + settleLimitMs + measureMs;
          }
        }
        if (settled === undefined && rejected > 0 && Date.now() - quietSince >= quietMs) {
          if (Date.now() - start >= settleLimitMs) break;
          settled = now;
          end = Date.now() + measureMs;
        }
        if (settled === undefined && Date.now() - start >= settleLimitMs) break;
      }
      end = Date.now();
    })();
    let timedOut = 0;
    const caller = async (index: number): Promise<void> => {
      const iccid = `89861000${String(index).padStart(12, '0')}`;
      while (Date.now() < end) {
        try {
          const r = await callThroughLimiter(
            { client, limiter },
            { carrierId: 'pb', group: 'g', type: 'card_status', account, iccid, deadline: Math.min(Date.now() + 2000, end), callReserveMs: 500 },
          );
          if (r.outcome === 'deferred') await sleep(100);
        } catch (error) {
          // A refusal is the carrier's answer under test; a timeout is a call this test's own
          // deadline cut short (the window's end leaves a call granted just before it a few ms —
          // CI saw "timed out after 2 ms"), counted and reported, not the limiter's decision.
          if (error instanceof GatewayError && error.errorClass === 'transient' && error.reason === 'timeout') timedOut += 1;
          else if (!(error instanceof GatewayError && error.errorClass === 'rate_limited')) throw error;
        }
      }
    };
    await Promise.all([snapshot, ...Array.from({ length: 30 }, (_, i) => caller(i))]);
    const final = groupStats(await simStats(sim.url), account, 'g');
    client.close();
    assert.ok(settled, `no ${quietMs} ms at one rate ≤ 6 QPS without rejections within ${settleLimitMs} ms: ${JSON.stringify(final)}`);
    const rate = ((final.calls - settled.calls) * 1000) / measureMs;
    const effective = await limiter.effectiveRate('pb', 'g');
    const report = { settling: settled, final, resettled, measuredQps: rate, effectiveRate: effective, timedOut, limiter: limiter.stats() };
    process.stdout.write(`# pushback: ${JSON.stringify(report)}\n`);
    assert.ok(settled.rejected > 0, 'the carrier did push back during settling');
    assert.ok(limiter.stats().pushbacksApplied >= 1);
    assert.equal(final.rejected - settled.rejected, 0, 'no rejections after settling');
    // What the limiter decided: the rate it grants, the carrier's or one below it (see above), never
    // above it and not collapsed. The rate the callers reached (measuredQps above) depends on their
    // getting the CPU when their slots come: reported, not asserted.
    assert.ok(effective === 6 || effective === 5, `the limiter settled at ${effective} QPS (carrier: 6)`);
  });
});

interface Child {
  readonly ready: Promise<void>;
  readonly output: Promise<CallerOutput>;
  start(startAt: number): void;
}

/** Spawns a caller process; it answers `ready`, waits for the start time on stdin, then prints its counts. */
function spawnCaller(fixture: string, input: CallerInput): Child {
  const child = spawn(process.execPath, [...typescriptExecArgv(), fixture], {
    env: { ...process.env, LIMITER_CALLER: JSON.stringify(input) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    if (stdout.startsWith('ready\n')) markReady();
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const output = new Promise<CallerOutput>((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`caller ${input.processIndex} exited ${code}: ${stderr}`));
      else resolve(JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as CallerOutput);
    });
  });
  return { ready: Promise.race([ready, output.then(() => undefined)]), output, start: (startAt) => child.stdin.end(`${startAt}\n`) };
}
