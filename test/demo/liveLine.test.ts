/**
 * `npm start`'s live line against a real PostgreSQL and Redis, with a scheduler that stops answering
 * (as in an outage, when its status query keeps retrying): one tick at a time, and stop() resolves
 * only after the tick in flight has ended — its caller closes the Temporal client right after.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { createCarrier } from '../../src/db/carriers.js';
import { insertCards } from '../../src/db/cards.js';
import { normaliseCard } from '../../src/domain/cardInput.js';
import type { Pool } from '../../src/db/pool.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { LIVE_ACCOUNTS, startLiveLine } from '../../demo/liveLine.js';
import type { SchedulerStatus } from '../../src/workflow-safe/loopStatus.js';
import { createTestDb } from '../../testkit/db.js';
import { createTestRedis } from '../../testkit/redis.js';
import type { SimulatorControl } from '../../src/simulator/control.js';

const EVERY_MS = 50;
const HANG_MS = 600;

test('live line: a tick held up by a scheduler that does not answer is not overlapped, and stop waits for it', async () => {
  const db = await createTestDb('live-line');
  const redis = await createTestRedis('live-line');
  try {
    await createCarrier(db.pool, { name: 'live1', gatewayAccount: 'live1-gw', groups: [{ name: 'main', qps: 5 }] });
    let calls = 0;
    let concurrent = 0;
    let maxConcurrent = 0;
    let lastEnded = 0;
    const scheduler = async (): Promise<SchedulerStatus | undefined> => {
      calls += 1;
      concurrent += 1;
      maxConcurrent = Math.max(maxConcurrent, concurrent);
      await sleep(HANG_MS);
      concurrent -= 1;
      lastEnded = Date.now();
      return undefined;
    };
    const lines: string[] = [];
    const live = startLiveLine({
      pool: db.pool,
      store: new CarrierQueueStore(redis.redis, redis.namespace),
      simulator: undefined,
      scheduler,
      log: (line) => void lines.push(line),
      everyMs: EVERY_MS,
    });
    // Long enough for a dozen periods: overlapping ticks would have called the scheduler as often.
    await sleep(HANG_MS + EVERY_MS * 4);
    const stopCalledAt = Date.now();
    await live.stop();
    const stoppedAt = Date.now();
    assert.ok(calls >= 1, 'the scheduler was asked');
    assert.equal(maxConcurrent, 1, `ticks overlapped: ${maxConcurrent} scheduler calls at once`);
    assert.equal(concurrent, 0, 'stop resolved while a tick was still waiting for the scheduler');
    assert.ok(lastEnded <= stoppedAt && lastEnded >= stopCalledAt - HANG_MS, 'the last tick ended before stop resolved');
    assert.ok(
      lines.some((line) => line.includes('live1:') && line.includes('scheduler ?')),
      `a line shows the silent scheduler as "?": ${lines.join(' / ')}`,
    );
    const printed = lines.length;
    await sleep(EVERY_MS * 3);
    assert.equal(lines.length, printed, 'no tick after stop');
  } finally {
    await redis.close();
    await db.close();
  }
});

test('live line: with the Redis read failing (Redis away), stop still waits for the scheduler query of the tick', async () => {
  const db = await createTestDb('live-line-redis-away');
  try {
    await createCarrier(db.pool, { name: 'live2', gatewayAccount: 'live2-gw', groups: [{ name: 'main', qps: 5 }] });
    let open = 0;
    let asked = 0;
    const scheduler = async (): Promise<SchedulerStatus | undefined> => {
      asked += 1;
      open += 1;
      await sleep(HANG_MS);
      open -= 1;
      return undefined;
    };
    const lines: string[] = [];
    const store = {
      depths: async (): Promise<never> => {
        throw new Error('Connection is closed.');
      },
    } as unknown as CarrierQueueStore;
    const live = startLiveLine({ pool: db.pool, store, simulator: undefined, scheduler, log: (line) => void lines.push(line), everyMs: EVERY_MS });
    // Wait for the condition, not a time: the first tick has asked the scheduler.
    while (asked === 0) await sleep(EVERY_MS);
    await live.stop();
    // The caller closes the Temporal connection now: no query of the tick may still be running.
    assert.equal(open, 0, 'stop resolved while the scheduler query of the tick was still running');
    assert.ok(
      lines.some((line) => line.includes('Connection is closed.')),
      `the failed tick is reported: ${lines.join(' / ')}`,
    );
  } finally {
    await db.close();
  }
});

/**
 * Accounts named `names` (one 5-QPS group `main` each) and a live line over them on a fresh
 * PostgreSQL schema and Redis namespace: its first `count` lines, the line stopped after them.
 */
async function firstLines(
  label: string,
  names: readonly string[],
  count: number,
  extra: Pick<Parameters<typeof startLiveLine>[0], 'simulator' | 'scheduler'>,
  /** Runs once the accounts exist, before the line starts (rows the line reads). */
  before?: (pool: Pool, carrierIds: readonly string[]) => Promise<void>,
): Promise<string[]> {
  const db = await createTestDb(label);
  const redis = await createTestRedis(label);
  try {
    const ids: string[] = [];
    for (const name of names) ids.push((await createCarrier(db.pool, { name, gatewayAccount: `${name}-gw`, groups: [{ name: 'main', qps: 5 }] })).id);
    await before?.(db.pool, ids);
    const lines: string[] = [];
    const live = startLiveLine({
      pool: db.pool,
      store: new CarrierQueueStore(redis.redis, redis.namespace),
      log: (line) => void lines.push(line),
      everyMs: EVERY_MS,
      ...extra,
    });
    while (lines.length < count) await sleep(EVERY_MS);
    await live.stop();
    return lines;
  } finally {
    await redis.close();
    await db.close();
  }
}

/** A simulator whose stats name, for `gatewayAccount`, the calls `groups()` answers at each read. */
const simulatorCounting = (gatewayAccount: string, groups: () => Record<string, { calls: number }>): SimulatorControl =>
  ({ stats: async () => ({ accounts: { [gatewayAccount]: { groups: groups() } } }) }) as unknown as SimulatorControl;

test('live line: with many accounts, the busiest six are shown one by one and asked for their status; the rest summed in one part', async () => {
  const asked = new Set<string>();
  const names = Array.from({ length: LIVE_ACCOUNTS + 4 }, (_, i) => `many${i + 1}`);
  const [line] = await firstLines('live-line-many', names, 1, {
    simulator: undefined,
    scheduler: async (carrierId) => {
      asked.add(carrierId);
      return undefined;
    },
  });
  assert.ok(line!.includes('+4 more accounts: 0.0 checks/s'), line);
  assert.equal(asked.size, LIVE_ACCOUNTS, 'only the accounts shown are asked for their scheduler status');
  assert.ok(line!.includes('many1:') && !line!.includes('many10:'), `the oldest shown among equally busy accounts: ${line}`);
});

test('live line: budget use counts only the calls the account’s groups are charged for (realname without real-name control is not)', async () => {
  // Every tick the simulator has seen a million more calls outside the account's groups, none in them.
  let uncharged = 0;
  const simulator = simulatorCounting('budget1-gw', () => {
    uncharged += 1_000_000;
    return { default: { calls: uncharged }, main: { calls: 0 } };
  });
  const lines = await firstLines('live-line-budget', ['budget1'], 2, { simulator, scheduler: async () => undefined });
  assert.ok(lines[1]!.includes('budget 0% (0.0/5 qps)'), lines[1]);
});

test('live line: a gateway account the simulator was never told the groups of has every call counted against its budget', async () => {
  let calls = 0;
  const simulator = simulatorCounting('budget2-gw', () => {
    calls += 1000;
    return { default: { calls } };
  });
  const lines = await firstLines('live-line-budget-default', ['budget2'], 2, { simulator, scheduler: async () => undefined });
  assert.match(lines[1]!, /budget \d+% \((\d+\.\d)\/5 qps\)/);
  assert.ok(!lines[1]!.includes('budget 0%'), lines[1]);
});

test('live line: staleness p99 of the changes learned in the last hour, only for an account whose carrier dated them', async () => {
  const lines = await firstLines(
    'live-line-stale',
    ['stale1', 'stale2'],
    1,
    { simulator: undefined, scheduler: async () => undefined },
    async (pool, [dated]) => {
      const [card] = await insertCards(pool, [normaliseCard({ iccid: '89860000000000000071', carrierId: dated! })]);
      // Two changes known 1 s and 3 s after they happened: p99 interpolates to 2 980 ms.
      await pool.query(
        `INSERT INTO card_change (card_id, carrier_id, check_type, changed_at, learned_at)
       VALUES ($1, $2, 'card_status', now() - interval '11 s', now() - interval '10 s'), ($1, $2, 'card_status', now() - interval '23 s', now() - interval '20 s')`,
        [card!.id, dated],
      );
    },
  );
  const parts = lines[0]!.split(' | ');
  const stale1 = parts.find((part) => part.includes('stale1:'));
  const stale2 = parts.find((part) => part.includes('stale2:'));
  assert.match(stale1 ?? '', /stale p99 2980ms/, lines[0]);
  assert.ok(stale2 !== undefined && !stale2.includes('stale p99'), `no staleness without dated changes: ${lines[0]}`);
});
