/**
 * scale: N cards (default 1 000 000) in Redis over 10 accounts → import time, memory per card
 * (INFO memory used_memory delta ÷ cards) and the latency of claim rounds of 200 against lanes
 * that size. Import goes through the lifecycle service (PostgreSQL rows + Redis upserts, chunks of
 * 10 000) or, with --import redis, straight into Redis with CarrierQueueStore.upsertMany.
 */
import type { Redis } from 'ioredis';
import { connectRedis } from '../../src/redis/connect.js';
import { DueField } from '../../src/redis/dueFields.js';
import type { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { type Scenario } from '../lib/context.js';
import { createBenchStack } from '../lib/stack.js';
import { addCards, seedAccount } from '../lib/seed.js';
import { distribution, round, sleep } from '../lib/stats.js';
import { atLeast } from '../lib/verdict.js';

const ACCOUNTS = 10;
const IMPORT_CHUNK = 10_000;
const INTERVAL_SEC = 60;
const CLAIM_ROUNDS = 200;
const ROUND_SIZE = 200;
const LEASE_MS = 60_000;

async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
}

/** Straight into Redis: the same upsert script the lifecycle service pipelines, no PostgreSQL. */
async function importToRedis(store: CarrierQueueStore, carrierIds: readonly string[], cards: number, log: (line: string) => void): Promise<void> {
  const now = Date.now();
  for (let start = 0; start < cards; start += IMPORT_CHUNK) {
    const batch = Array.from({ length: Math.min(IMPORT_CHUNK, cards - start) }, (_, i) => {
      const index = start + i;
      // Due over the last minute, like a backlog: every card is claimable.
      return { carrierId: carrierIds[index % carrierIds.length]!, cardId: String(index + 1), now, dues: { card_status: now - 60_000 + (index % 60_000) } };
    });
    await store.upsertMany(batch);
    if ((start / IMPORT_CHUNK) % 20 === 0) log(`imported ${start + batch.length}`);
  }
}

export const scale: Scenario = async (context) => {
  const cards = context.options.cards;
  const mode = context.options.importMode;
  const stack = await createBenchStack(context.config, 'scale');
  const info = await connectRedis(context.config.REDIS_URL, { connectionName: 'bench-scale-info' });
  try {
    const { store } = stack.deps;
    const perAccount = Math.ceil(cards / ACCOUNTS);
    const carrierIds: string[] = [];
    const memoryBefore = await usedMemory(info);
    const importStarted = performance.now();
    if (mode === 'lifecycle') {
      for (let a = 0; a < ACCOUNTS; a += 1) {
        const count = Math.min(perAccount, cards - a * perAccount);
        const account = await seedAccount(stack, {
          name: `sc${a + 1}`,
          qps: { status: 100 },
          typeGroups: { card_status: 'status' },
          cards: 0,
          intervalsSec: { card_status: INTERVAL_SEC },
          latencyMs: { p50: 5, p99: 20 },
        });
        carrierIds.push(account.carrier.id);
        if (count > 0) await addCards(stack, account.carrier.id, account.serial, 0, count, 'active', IMPORT_CHUNK);
        context.log(`imported ${Math.min(cards, (a + 1) * perAccount)} cards`);
      }
    } else {
      for (let a = 0; a < ACCOUNTS; a += 1) carrierIds.push(String(9_000_000 + a));
      await importToRedis(store, carrierIds, cards, context.log);
    }
    const importSeconds = (performance.now() - importStarted) / 1000;
    const memoryAfter = await usedMemory(info);
    const bytesPerCard = (memoryAfter - memoryBefore) / cards;
    let inRedis = 0;
    for (const carrierId of carrierIds) inRedis += (await store.depths(carrierId)).normal;
    // Lifecycle imports jitter first dues over max(interval / 10, 2 s): wait until all are due.
    if (mode === 'lifecycle') await sleep(Math.max(INTERVAL_SEC * 100, 2000));

    const latencies: number[] = [];
    let claimedTotal = 0;
    // Never more rounds than the cards fill: a round that finds nothing due measures nothing.
    const rounds = Math.min(CLAIM_ROUNDS, Math.floor(cards / ROUND_SIZE));
    for (let round = 0; round < rounds; round += 1) {
      const carrierId = carrierIds[round % carrierIds.length]!;
      const started = performance.now();
      const result = await store.claim({
        carrierId,
        leaseMs: LEASE_MS,
        inflightLimit: ROUND_SIZE,
        priorityRatio: 0.5,
        tokenPrefix: `scale-${round}`,
        groupBudget: { status: ROUND_SIZE },
        typeGroups: { card_status: 'status' },
        countRealname: false,
      });
      latencies.push(performance.now() - started);
      claimedTotal += result.claimed.length;
      // Untimed: execute the claimed cards so the next round of this account has room again.
      await Promise.all(
        result.claimed.map(async ({ cardId, token }) => {
          if ((await store.acquireExec(carrierId, cardId, token, 'scale', LEASE_MS)) !== 'acquired') return;
          const now = Date.now();
          await store.finish({
            carrierId,
            cardId,
            token,
            now,
            set: { [DueField.due('card_status')]: now + 3_600_000, [DueField.ok('card_status')]: now },
            del: [],
          });
        }),
      );
    }
    const claim = distribution(latencies);
    // Not a performance target: a check that the import did what the figures assume.
    const verdicts = [atLeast('cards in the Redis lanes after the import', inRedis, cards, (n) => String(n), 'every imported card')];
    const importPath =
      mode === 'lifecycle'
        ? `LifecycleService.createCards in chunks of ${IMPORT_CHUNK} (PostgreSQL INSERT + one Redis pipeline of upsert.lua per chunk)`
        : `CarrierQueueStore.upsertMany in chunks of ${IMPORT_CHUNK} (Redis only)`;
    return {
      title: `${cards} cards in Redis`,
      explain: [
        `Import: ${importPath}, ${ACCOUNTS} accounts.`,
        "Memory per card = INFO memory used_memory after − before, ÷ cards (the shared Redis also holds other users' keys, which may move in between).",
        `Claim round = one claim.lua call for up to ${ROUND_SIZE} due cards of one account (alone, one round trip), ${rounds} rounds over the accounts.`,
      ],
      config: { cards, importMode: mode, accounts: ACCOUNTS, importChunk: IMPORT_CHUNK, intervalSec: INTERVAL_SEC, claimRounds: rounds, roundSize: ROUND_SIZE },
      results: {
        importSeconds: round(importSeconds),
        cardsPerSecond: Math.round(cards / importSeconds),
        memoryBefore,
        memoryAfter,
        bytesPerCard: Math.round(bytesPerCard),
        inRedis,
        claimedTotal,
        claimMs: claim,
      },
      tables: [
        {
          headers: ['cards', 'import', 'import s', 'cards/s', 'Redis bytes/card', 'claim rounds', 'claim p50 ms', 'claim p99 ms', 'claim max ms'],
          numeric: [true, false, true, true, true, true, true, true, true],
          rows: [[cards, mode, round(importSeconds, 1), Math.round(cards / importSeconds), Math.round(bytesPerCard), claim.n, claim.p50, claim.p99, claim.max]],
        },
      ],
      verdicts,
      notes: [
        `${rounds} claim rounds claimed ${claimedTotal} cards (${rounds * ROUND_SIZE} asked for).`,
        `Redis grew by ${round((memoryAfter - memoryBefore) / 1024 / 1024, 1)} MB for ${cards} cards: one due hash per ` +
          `card plus its member in the account's lane ZSET.`,
      ],
    };
  } finally {
    await info.quit();
    await stack.close();
  }
};
