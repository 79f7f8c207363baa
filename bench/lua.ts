/**
 * `npm run bench:lua`: throughput of the carrier queue scripts against the local Redis.
 *
 * - claim + acquireExec + finish cycles per second for 100 000 due cards in one account, and the
 *   same 100 000 cards spread over 50 accounts (claimed concurrently);
 * - p50/p99 latency of one claim round of 200 cards.
 *
 * Writes bench/results/lua.json and bench/results/lua.md and prints the Markdown table. Keys live
 * under a throw-away namespace that is deleted at the end. Not asserted anywhere.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { connectRedis } from '../src/redis/connect.js';
import { loadConfig } from '../src/config/index.js';
import { CarrierQueueStore, type UpsertInput } from '../src/redis/carrierQueueStore.js';
import { DueField } from '../src/redis/dueFields.js';

const TOTAL_CARDS = Number(process.env.BENCH_LUA_CARDS ?? 100_000);
const ROUND_SIZE = 200;
const LEASE_MS = 60_000;
const UPSERT_BATCH = 5_000;
// Connections for the multi-account run: claims of different accounts proceed in parallel.
const CONNECTIONS = 8;
const RESULTS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), 'results');

interface ScenarioResult {
  readonly scenario: string;
  readonly accounts: number;
  readonly cards: number;
  readonly cycles: number;
  readonly seconds: number;
  readonly cyclesPerSecond: number;
  readonly claimRounds: number;
  readonly claimP50Ms: number;
  readonly claimP99Ms: number;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function seed(store: CarrierQueueStore, accounts: readonly string[], now: number): Promise<void> {
  let batch: UpsertInput[] = [];
  for (let i = 0; i < TOTAL_CARDS; i += 1) {
    const carrierId = accounts[i % accounts.length]!;
    // Spread the due times over the last minute so claims walk a realistic ZSET.
    batch.push({ carrierId, cardId: String(i), now, dues: { card_status: now - 60_000 + (i % 60_000), carddata: now + 3_600_000 } });
    if (batch.length === UPSERT_BATCH) {
      await store.upsertMany(batch);
      batch = [];
    }
  }
  await store.upsertMany(batch);
}

/** One account's worth of work: claim rounds of 200 until nothing is due, each card executed. */
async function drainAccount(store: CarrierQueueStore, carrierId: string, claimLatencies: number[]): Promise<number> {
  let cycles = 0;
  for (let round = 0; ; round += 1) {
    const now = Date.now();
    const started = performance.now();
    const result = await store.claim({
      carrierId,
      now,
      leaseMs: LEASE_MS,
      inflightLimit: ROUND_SIZE,
      priorityRatio: 0.5,
      tokenPrefix: `b${carrierId}-${round}`,
      groupBudget: { g1: 10_000 },
      typeGroups: { card_status: 'g1', carddata: 'g1', realname: 'g2' },
      countRealname: false,
    });
    if (result.claimed.length === ROUND_SIZE) claimLatencies.push(performance.now() - started);
    if (result.claimed.length === 0) return cycles;
    await Promise.all(
      result.claimed.map(async ({ cardId, token }) => {
        const exec = await store.acquireExec(carrierId, cardId, token, 'bench', LEASE_MS, now);
        if (exec !== 'acquired') throw new Error(`acquireExec ${cardId}: ${exec}`);
        const finishedAt = Date.now();
        const owned = await store.finish({
          carrierId,
          cardId,
          token,
          now: finishedAt,
          set: { [DueField.due('card_status')]: finishedAt + 3_600_000, [DueField.ok('card_status')]: finishedAt },
          del: [DueField.fail('card_status')],
        });
        if (!owned) throw new Error(`finish ${cardId} lost its claim`);
      }),
    );
    cycles += result.claimed.length;
  }
}

async function runScenario(stores: readonly CarrierQueueStore[], name: string, accountCount: number, tag: string): Promise<ScenarioResult> {
  const accounts = Array.from({ length: accountCount }, (_, i) => `${tag}${i}`);
  await seed(stores[0]!, accounts, Date.now());
  const latencies: number[] = [];
  const started = performance.now();
  const perAccount = await Promise.all(accounts.map((carrierId, i) => drainAccount(stores[i % stores.length]!, carrierId, latencies)));
  const seconds = (performance.now() - started) / 1000;
  const cycles = perAccount.reduce((sum, n) => sum + n, 0);
  if (cycles !== TOTAL_CARDS) throw new Error(`${name}: executed ${cycles} of ${TOTAL_CARDS} cards`);
  latencies.sort((a, b) => a - b);
  return {
    scenario: name,
    accounts: accountCount,
    cards: TOTAL_CARDS,
    cycles,
    seconds: Number(seconds.toFixed(2)),
    cyclesPerSecond: Math.round(cycles / seconds),
    claimRounds: latencies.length,
    claimP50Ms: Number(percentile(latencies, 50).toFixed(2)),
    claimP99Ms: Number(percentile(latencies, 99).toFixed(2)),
  };
}

async function cleanup(redis: Redis, namespace: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${namespace}*`, 'COUNT', 5_000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}

function markdown(results: readonly ScenarioResult[], redisVersion: string): string {
  const lines = [
    `# Lua scripts benchmark (${new Date().toISOString()}, Redis ${redisVersion}, Node ${process.version})`,
    '',
    'One cycle = claim (share of a 200-card round) + acquireExec + finish for one card.',
    'Claim latency: in the one-account run each round runs alone (the script itself plus one round trip);',
    'in the 50-account run it includes queueing behind the other 49 accounts\' traffic on the same Redis.',
    '',
    '| scenario | accounts | cards | cycles/s | seconds | claim rounds of 200 | claim p50 ms | claim p99 ms |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...results.map(
      (r) =>
        `| ${r.scenario} | ${r.accounts} | ${r.cards} | ${r.cyclesPerSecond} | ${r.seconds} | ${r.claimRounds} | ${r.claimP50Ms} | ${r.claimP99Ms} |`,
    ),
  ];
  return `${lines.join('\n')}\n`;
}

async function main(): Promise<void> {
  const config = loadConfig();
  const namespace = `bench:lua:${randomUUID().slice(0, 8)}:`;
  const connections = await Promise.all(
    Array.from({ length: CONNECTIONS }, (_, i) => connectRedis(config.REDIS_URL, { connectionName: `bench-lua-${i}` })),
  );
  const stores = connections.map((redis) => new CarrierQueueStore(redis, namespace));
  const main = connections[0]!;
  try {
    const info = await main.info('server');
    const redisVersion = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
    const results = [
      await runScenario(stores.slice(0, 1), 'one account', 1, 'one'),
      await runScenario(stores, '50 accounts', 50, 'many'),
    ];
    mkdirSync(RESULTS_DIR, { recursive: true });
    writeFileSync(join(RESULTS_DIR, 'lua.json'), `${JSON.stringify({ date: new Date().toISOString(), redisVersion, results }, null, 2)}\n`);
    const table = markdown(results, redisVersion);
    writeFileSync(join(RESULTS_DIR, 'lua.md'), table);
    process.stdout.write(table);
  } finally {
    await cleanup(main, namespace);
    await Promise.all(connections.map((redis) => redis.quit()));
  }
}

await main();
