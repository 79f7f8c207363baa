/**
 * footprint: the per-unit costs a capacity model multiplies (docs/capacity.md) — Redis bytes per
 * card (seeded, claimed, and after polling), PostgreSQL rows and bytes per card execution and per
 * request-check, and Temporal work per execution (history events, workflow and activity tasks,
 * Temporal Cloud actions) for one and three gateway types, with the carrierScheduler's share.
 * Everything counted here is bytes, rows, events or actions, not time: a busy machine changes
 * how long the run takes, not the figures, so the runner lets this scenario through when busy.
 */
import { serveRequestCheck } from '../../src/app/requestCheckService.js';
import { pollingControlWorkflowId, schedulerWorkflowId } from '../../src/workflow-safe/workflowIds.js';
import { accountKeys } from '../../src/redis/keys.js';
import type { RedisConnection } from '../../src/redis/connection.js';
import { scanKeys } from '../../testkit/redis.js';
import { connectRedis } from '../../src/redis/connect.js';
import type { CheckType } from '../../src/workflow-safe/checkTypes.js';
import type { Pool } from '../../src/db/pool.js';
import { windowSeconds, type Scenario, type ScenarioContext } from '../lib/context.js';
import { createBenchStack, type BenchStack } from '../lib/stack.js';
import { seedAccount, type AccountSpec, type SeededAccount } from '../lib/seed.js';
import { historyShape, type HistoryShape } from '../lib/history.js';
import { countEvents, emptyCounts, eventsInWindow, fetchEvents, perUnit, type EventCounts } from '../lib/actions.js';
import { cpuNote, measureWindow } from '../lib/window.js';
import type { StartMode } from '../lib/options.js';
import type { Table } from '../lib/report.js';
import { round, sleep } from '../lib/stats.js';

/** Cards per account of the Redis measurement, polled for 1 or 4 check types: docs/capacity.md's per-card figures. */
const REDIS_CARDS = 5000;
/** Short intervals: the jitter window is then 2 s, so the cards are claimable right after seeding. */
const REDIS_INTERVAL_SEC = 10;
/** Cards per account of the polling run and their interval: ~10 executions/s in all, within what a busy 2-core machine runs. */
const POLL_CARDS = 150;
const POLL_INTERVAL_SEC = 30;
const POLL_QPS = 100;
/** Card runs whose histories are read per shape. */
const HISTORY_SAMPLE = 20;
/** Request-checks sent after the polling window, one a second. */
const REQUEST_CHECKS = 10;
const REQUEST_DRAIN_MS = 8000;

const ONE_TYPE = { card_status: 'status' } as const;
const THREE_TYPES = { card_status: 'status', carddata: 'data', realname: 'realname' } as const;
const FOUR_TYPES = { card_status: 'status', carddata: 'data', realname: 'realname', package: 'local' } as const;

// ---------------------------------------------------------------------------------------------
// Redis

const KEY_CLASSES = ['due', 'queue', 'prio', 'claim', 'exec', 'fin', 'running', 'rateLimit', 'engine', 'other'] as const;
type KeyClass = (typeof KEY_CLASSES)[number];
type KeyBytes = Record<KeyClass, { keys: number; bytes: number }>;

function emptyKeyBytes(): KeyBytes {
  return Object.fromEntries(KEY_CLASSES.map((name) => [name, { keys: 0, bytes: 0 }])) as KeyBytes;
}

function classify(key: string, base: string): KeyClass {
  const rest = key.slice(base.length);
  if (rest.startsWith('card:')) {
    const suffix = rest.slice(rest.lastIndexOf(':') + 1);
    return suffix === 'due' || suffix === 'claim' || suffix === 'exec' || suffix === 'fin' ? suffix : 'other';
  }
  if (rest === 'queue' || rest === 'prio' || rest === 'running' || rest === 'engine') return rest;
  if (rest.startsWith('rl:')) return 'rateLimit';
  return 'other';
}

/** MEMORY USAGE (all samples) of every key of one account, by kind of key. */
async function accountMemory(redis: RedisConnection, base: string): Promise<KeyBytes> {
  const out = emptyKeyBytes();
  const seen = new Set<string>();
  for await (const batch of scanKeys(redis, `${base}*`, 5000)) {
    const keys = batch.filter((key) => !seen.has(key));
    keys.forEach((key) => seen.add(key));
    // One account's keys share its hash tag, so one pipeline per batch stays on one slot.
    const pipeline = redis.pipeline();
    for (const key of keys) pipeline.call('MEMORY', 'USAGE', key, 'SAMPLES', '0');
    const replies = (await pipeline.exec()) ?? [];
    replies.forEach(([error, reply], i) => {
      if (error || reply === null) return; // expired between SCAN and MEMORY USAGE
      const entry = out[classify(keys[i]!, base)];
      entry.keys += 1;
      entry.bytes += Number(reply);
    });
  }
  return out;
}

function totalBytes(bytes: KeyBytes, classes: readonly KeyClass[] = KEY_CLASSES): number {
  return classes.reduce((sum, name) => sum + bytes[name].bytes, 0);
}

function diffBytes(after: KeyBytes, before: KeyBytes): KeyBytes {
  const out = emptyKeyBytes();
  for (const name of KEY_CLASSES) out[name] = { keys: after[name].keys - before[name].keys, bytes: after[name].bytes - before[name].bytes };
  return out;
}

async function usedMemory(redisUrl: string): Promise<number> {
  const redis = await connectRedis(redisUrl, { connectionName: 'bench-footprint-info' });
  try {
    return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1] ?? 0);
  } finally {
    await redis.quit();
  }
}

interface RedisSeeded {
  readonly account: string;
  readonly types: number;
  readonly cards: number;
  readonly keys: KeyBytes;
  readonly bytesPerCard: number;
  readonly keysPerCard: number;
}

interface RedisClaimed {
  readonly claimed: number;
  readonly delta: KeyBytes;
  readonly bytesPerClaimedCard: number;
}

interface RedisResult {
  readonly seeded: RedisSeeded[];
  readonly claimed: RedisClaimed;
  readonly usedMemoryDeltaPerCard: number;
  readonly encoding: string;
}

function redisSpec(name: string, typeGroups: Readonly<Record<string, string>>): AccountSpec {
  const groups = [...new Set(Object.values(typeGroups))].filter((group) => group !== 'local');
  return {
    name,
    qps: Object.fromEntries(groups.map((group) => [group, POLL_QPS])),
    typeGroups: Object.fromEntries(Object.entries(typeGroups).filter(([, group]) => group !== 'local')),
    cards: REDIS_CARDS,
    intervalsSec: Object.fromEntries(Object.keys(typeGroups).map((type) => [type, REDIS_INTERVAL_SEC])),
    latencyMs: { p50: 20, p99: 80 },
    realnameControl: true,
  };
}

/**
 * Seeds 5 000 cards with one type and 5 000 with four through the lifecycle service (PostgreSQL,
 * then upsert.lua), sums MEMORY USAGE per account, then claims the four-type account's cards and
 * acquires their execution rights, as a claim round and prepareExecution do, and measures again.
 */
async function measureRedis(context: ScenarioContext): Promise<RedisResult> {
  const stack = await createBenchStack(context.config, 'fp-redis');
  try {
    const redis = stack.deps.redis;
    const memoryBefore = await usedMemory(context.config.REDIS_URL);
    const one = await seedAccount(stack, redisSpec('fpr1', ONE_TYPE));
    const four = await seedAccount(stack, redisSpec('fpr4', FOUR_TYPES));
    const memoryAfter = await usedMemory(context.config.REDIS_URL);
    context.log(`seeded ${REDIS_CARDS} cards with 1 type and ${REDIS_CARDS} with 4 types`);
    const seeded: RedisSeeded[] = [];
    for (const [account, types] of [
      [one, 1],
      [four, 4],
    ] as const) {
      const keys = await accountMemory(redis, accountKeys(stack.namespace, account.carrier.id).base);
      const perCard = totalBytes(keys, ['due', 'queue', 'prio']);
      seeded.push({
        account: account.spec.name,
        types,
        cards: REDIS_CARDS,
        keys,
        bytesPerCard: round(perCard / REDIS_CARDS, 1),
        keysPerCard: round((keys.due.keys + keys.claim.keys + keys.exec.keys) / REDIS_CARDS, 2),
      });
    }
    const sampleKey = accountKeys(stack.namespace, four.carrier.id).due(four.cards[0]!.id);
    const encoding = String(await redis.call('OBJECT', 'ENCODING', sampleKey));

    // Every due time is within the 2 s jitter window: wait it out, then claim everything.
    await sleep(2500);
    const base = accountKeys(stack.namespace, four.carrier.id).base;
    const before = await accountMemory(redis, base);
    const claimed: { cardId: string; token: string }[] = [];
    for (let roundNo = 1; roundNo <= 10 && claimed.length < REDIS_CARDS; roundNo += 1) {
      const result = await stack.deps.store.claim({
        carrierId: four.carrier.id,
        leaseMs: 120_000,
        inflightLimit: REDIS_CARDS,
        priorityRatio: 0,
        tokenPrefix: `fp-${roundNo}`,
        typeGroups: { ...four.spec.typeGroups },
        countRealname: true,
      });
      claimed.push(...result.claimed.map((card) => ({ cardId: card.cardId, token: card.token })));
      if (result.claimed.length === 0) break;
    }
    for (let start = 0; start < claimed.length; start += 500) {
      await Promise.all(
        claimed
          .slice(start, start + 500)
          .map((card) => stack.deps.store.acquireExec(four.carrier.id, card.cardId, card.token, `fp-run-${card.cardId}`, 120_000)),
      );
    }
    const delta = diffBytes(await accountMemory(redis, base), before);
    context.log(`claimed ${claimed.length} cards and acquired their execution rights`);
    return {
      seeded,
      claimed: { claimed: claimed.length, delta, bytesPerClaimedCard: claimed.length > 0 ? round(totalBytes(delta) / claimed.length, 1) : 0 },
      usedMemoryDeltaPerCard: round((memoryAfter - memoryBefore) / (2 * REDIS_CARDS), 1),
      encoding,
    };
  } finally {
    await stack.close();
  }
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

interface TableReading {
  readonly rows: number;
  readonly totalBytes: number;
  readonly indexBytes: number;
  /** Cumulative statistics (pg_stat_user_tables); they lag the rows by up to a few seconds. */
  readonly inserted: number;
  readonly updated: number;
  readonly hotUpdated: number;
  readonly deleted: number;
}

async function tableReadings(pool: Pool, schema: string): Promise<Map<string, TableReading>> {
  const { rows } = await pool.query<{
    relname: string;
    total: string;
    idx: string;
    ins: string | null;
    upd: string | null;
    hot: string | null;
    del: string | null;
  }>(
    `SELECT c.relname, pg_total_relation_size(c.oid)::text AS total, pg_indexes_size(c.oid)::text AS idx,
            s.n_tup_ins::text AS ins, s.n_tup_upd::text AS upd, s.n_tup_hot_upd::text AS hot, s.n_tup_del::text AS del
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
      WHERE n.nspname = $1 AND c.relkind = 'r'`,
    [schema],
  );
  const out = new Map<string, TableReading>();
  for (const row of rows) {
    // Exact counts: the statistics above are for updates, which no count can give.
    const counted = await pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM "${schema}"."${row.relname}"`);
    out.set(row.relname, {
      rows: Number(counted.rows[0]?.n ?? 0),
      totalBytes: Number(row.total),
      indexBytes: Number(row.idx),
      inserted: Number(row.ins ?? 0),
      updated: Number(row.upd ?? 0),
      hotUpdated: Number(row.hot ?? 0),
      deleted: Number(row.del ?? 0),
    });
  }
  return out;
}

interface TableCost {
  readonly table: string;
  readonly rowsAdded: number;
  readonly rowsPerExecution: number;
  readonly updatesPerExecution: number;
  readonly hotUpdateShare: number | null;
  readonly bytesAdded: number;
  readonly bytesPerExecution: number;
  /** Heap + TOAST + indexes per added row (null when no row was added). */
  readonly bytesPerRow: number | null;
  readonly indexBytesPerRow: number | null;
}

function tableCosts(before: Map<string, TableReading>, after: Map<string, TableReading>): { executions: number; statExecutions: number; tables: TableCost[] } {
  const exec = (reading: Map<string, TableReading>): TableReading | undefined => reading.get('card_execution');
  const executions = (exec(after)?.rows ?? 0) - (exec(before)?.rows ?? 0);
  // Updates come from the statistics: divide by executions counted by the same statistics.
  const statExecutions = (exec(after)?.inserted ?? 0) - (exec(before)?.inserted ?? 0);
  const tables: TableCost[] = [];
  for (const [table, end] of [...after].sort(([a], [b]) => a.localeCompare(b))) {
    const start = before.get(table) ?? { rows: 0, totalBytes: 0, indexBytes: 0, inserted: 0, updated: 0, hotUpdated: 0, deleted: 0 };
    const rowsAdded = end.rows - start.rows;
    const updates = end.updated - start.updated;
    const bytesAdded = end.totalBytes - start.totalBytes;
    if (rowsAdded === 0 && updates === 0 && bytesAdded === 0) continue;
    tables.push({
      table,
      rowsAdded,
      rowsPerExecution: executions > 0 ? round(rowsAdded / executions, 3) : 0,
      updatesPerExecution: statExecutions > 0 ? round(updates / statExecutions, 3) : 0,
      hotUpdateShare: updates > 0 ? round((end.hotUpdated - start.hotUpdated) / updates, 2) : null,
      bytesAdded,
      bytesPerExecution: executions > 0 ? round(bytesAdded / executions, 1) : 0,
      bytesPerRow: rowsAdded > 0 ? Math.round(bytesAdded / rowsAdded) : null,
      indexBytesPerRow: rowsAdded > 0 ? Math.round((end.indexBytes - start.indexBytes) / rowsAdded) : null,
    });
  }
  return { executions, statExecutions, tables };
}

interface RowWidths {
  /** card_execution: row datum size by number of types run. */
  readonly executionByTypes: Record<string, { rows: number; meanBytes: number }>;
  readonly observationByType: Record<string, { rows: number; meanBytes: number }>;
  /** Observation rows per execution, by account (1 and 3 types). */
  readonly observationsPerExecution: Record<string, number>;
  readonly partitions: { name: string; bound: string }[];
}

async function rowWidths(pool: Pool, from: Date, to: Date, accounts: readonly SeededAccount[]): Promise<RowWidths> {
  const exec = await pool.query<{ n: number; rows: string; bytes: string }>(
    `SELECT cardinality(types) AS n, count(*)::text AS rows, avg(pg_column_size(e.*))::text AS bytes
       FROM card_execution e WHERE started_at >= $1 AND started_at < $2 GROUP BY 1 ORDER BY 1`,
    [from, to],
  );
  const obs = await pool.query<{ check_type: string; rows: string; bytes: string }>(
    `SELECT check_type, count(*)::text AS rows, avg(pg_column_size(o.*))::text AS bytes
       FROM card_observation o WHERE observed_at >= $1 AND observed_at < $2 GROUP BY 1 ORDER BY 1`,
    [from, to],
  );
  const observationsPerExecution: Record<string, number> = {};
  for (const account of accounts) {
    const { rows } = await pool.query<{ e: string; o: string }>(
      `SELECT (SELECT count(*) FROM card_execution WHERE carrier_id = $1 AND started_at >= $2 AND started_at < $3)::text AS e,
              (SELECT count(*) FROM card_observation WHERE carrier_id = $1 AND observed_at >= $2 AND observed_at < $3)::text AS o`,
      [account.carrier.id, from, to],
    );
    const e = Number(rows[0]?.e ?? 0);
    observationsPerExecution[account.spec.name] = e > 0 ? round(Number(rows[0]?.o ?? 0) / e, 3) : 0;
  }
  const parts = await pool.query<{ name: string; bound: string }>(
    `SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'card_observation'::regclass ORDER BY 1`,
  );
  return {
    executionByTypes: Object.fromEntries(exec.rows.map((r) => [String(r.n), { rows: Number(r.rows), meanBytes: Math.round(Number(r.bytes)) }])),
    observationByType: Object.fromEntries(obs.rows.map((r) => [r.check_type, { rows: Number(r.rows), meanBytes: Math.round(Number(r.bytes)) }])),
    observationsPerExecution,
    partitions: parts.rows,
  };
}

// ---------------------------------------------------------------------------------------------
// Temporal: events, tasks and actions

interface CardRunCost {
  readonly types: number;
  /** Reused bench/lib/history.ts figures (events, workflow tasks, child runs). */
  readonly shape: HistoryShape;
  /** Means over the sampled completed runs. */
  readonly perRun: EventCounts;
}

async function cardRunCost(stack: BenchStack, from: Date, to: Date, types: number): Promise<CardRunCost> {
  const { rows } = await stack.pool.query<{ workflow_id: string; run_id: string }>(
    `SELECT workflow_id, run_id FROM card_execution
      WHERE started_at >= $1 AND started_at < $2 AND outcome = 'success' AND cardinality(types) = $3
      ORDER BY random() LIMIT $4`,
    [from, to, types, HISTORY_SAMPLE],
  );
  const runs = rows.map((row) => ({ workflowId: row.workflow_id, runId: row.run_id }));
  const shape = await historyShape(stack.client, runs);
  const total = emptyCounts();
  let completed = 0;
  for (const run of runs) {
    const events = await fetchEvents(stack.client.workflow.getHandle(run.workflowId, run.runId));
    if (!events.at(-1)?.workflowExecutionCompletedEventAttributes) continue;
    completed += 1;
    countEvents(events, total);
  }
  return { types, shape, perRun: perUnit(total, completed) };
}

interface SchedulerCost {
  readonly account: string;
  readonly executions: number;
  readonly rounds: number;
  readonly window: EventCounts;
  readonly perRound: EventCounts;
  readonly perExecution: EventCounts;
}

async function executionsOf(pool: Pool, carrierId: string, from: Date, to: Date): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(
    'SELECT count(*)::text AS n FROM card_execution WHERE carrier_id = $1 AND started_at >= $2 AND started_at < $3',
    [carrierId, from, to],
  );
  return Number(rows[0]?.n ?? 0);
}

async function schedulerCost(stack: BenchStack, account: SeededAccount, from: Date, to: Date): Promise<SchedulerCost> {
  const events = await eventsInWindow(stack.client, schedulerWorkflowId(account.carrier.id, stack.ref.workflowIdPrefix), from, to);
  const window = countEvents(events);
  const executions = await executionsOf(stack.pool, account.carrier.id, from, to);
  // One timer per tick (the loop's wait), so timers count claim rounds.
  return {
    account: account.spec.name,
    executions,
    rounds: window.timers,
    window,
    perRound: perUnit(window, window.timers),
    perExecution: perUnit(window, executions),
  };
}

// ---------------------------------------------------------------------------------------------
// One polling run per start mode

interface RequestCheckCost {
  readonly sent: number;
  readonly answered: Record<string, number>;
  readonly priorityItemRowsPerRequest: number;
  readonly auditRowsPerRequest: number;
  readonly priorityItemUpdatesPerRequest: number;
  /** Scheduler actions the requests added: the wake-up update (before: the requestCheck update and its activity). */
  readonly schedulerActionsPerRequest: number;
  readonly schedulerActionsByKind: Record<string, number>;
}

interface RedisSteady {
  readonly account: string;
  readonly types: number;
  readonly cards: number;
  readonly keys: KeyBytes;
  readonly dueBytesPerCard: number;
  readonly laneBytesPerCard: number;
  readonly finBytesPerKey: number;
  readonly finKeysPerCard: number;
  /** running + rate limiter + engine: per account, not per card. */
  readonly accountBytes: number;
}

interface PollingRun {
  readonly startMode: StartMode;
  readonly windowSeconds: number;
  readonly executions: number;
  readonly executionsPerSecond: number;
  readonly postgres: ReturnType<typeof tableCosts>;
  readonly widths: RowWidths;
  readonly cardRuns: CardRunCost[];
  readonly schedulers: SchedulerCost[];
  readonly pollingControl: { readonly windowSeconds: number; readonly counts: EventCounts };
  readonly redis: RedisSteady[];
  readonly requestChecks: RequestCheckCost | null;
  readonly cpu: string;
}

function pollSpec(name: string, typeGroups: Readonly<Record<string, string>>): AccountSpec {
  const groups = [...new Set(Object.values(typeGroups))];
  return {
    name,
    qps: Object.fromEntries(groups.map((group) => [group, POLL_QPS])),
    typeGroups,
    cards: POLL_CARDS,
    intervalsSec: Object.fromEntries(Object.keys(typeGroups).map((type) => [type, POLL_INTERVAL_SEC])),
    latencyMs: { p50: 20, p99: 80 },
    inflightLimit: 200,
    realnameControl: true,
  };
}

/**
 * Dues spread evenly over one interval (the load is even from the first second), and all of a
 * card's types due together, so every execution of the three-type account runs all three: the
 * shape being measured. Imports jitter each type on its own instead (see docs/capacity.md).
 */
async function spreadDues(stack: BenchStack, account: SeededAccount): Promise<void> {
  const now = Date.now();
  const types = Object.keys(account.spec.intervalsSec) as CheckType[];
  await stack.deps.store.upsertMany(
    account.cards.map((card, i) => {
      const due = now + 1000 + Math.floor((i / account.cards.length) * POLL_INTERVAL_SEC * 1000);
      return { carrierId: account.carrier.id, cardId: card.id, dues: Object.fromEntries(types.map((type) => [type, due])) };
    }),
  );
}

async function steadyRedis(stack: BenchStack, accounts: readonly SeededAccount[]): Promise<RedisSteady[]> {
  const out: RedisSteady[] = [];
  for (const account of accounts) {
    const keys = await accountMemory(stack.deps.redis, accountKeys(stack.namespace, account.carrier.id).base);
    const cards = account.cards.length;
    out.push({
      account: account.spec.name,
      types: Object.keys(account.spec.intervalsSec).length,
      cards,
      keys,
      dueBytesPerCard: round(keys.due.bytes / cards, 1),
      laneBytesPerCard: round((keys.queue.bytes + keys.prio.bytes) / cards, 1),
      finBytesPerKey: keys.fin.keys > 0 ? round(keys.fin.bytes / keys.fin.keys, 1) : 0,
      finKeysPerCard: round(keys.fin.keys / cards, 2),
      accountBytes: keys.running.bytes + keys.rateLimit.bytes + keys.engine.bytes,
    });
  }
  return out;
}

async function measureRequestChecks(context: ScenarioContext, stack: BenchStack, account: SeededAccount): Promise<RequestCheckCost> {
  const before = await tableReadings(stack.pool, stack.schema);
  const from = new Date();
  const answered: Record<string, number> = {};
  // Cards from the end of the list: their own schedule is not due during these seconds.
  const targets = account.cards.slice(-REQUEST_CHECKS);
  for (const card of targets) {
    const status = await serveRequestCheck(stack.ref, stack.services.requests, account.carrier.id, {
      cardId: card.id,
      types: ['card_status'],
      actor: 'bench',
      source: 'bench-footprint',
    }).then(
      (result) => result.status,
      (error: unknown) => `error: ${String(error).slice(0, 80)}`,
    );
    answered[status] = (answered[status] ?? 0) + 1;
    await sleep(1000);
  }
  await sleep(REQUEST_DRAIN_MS);
  const to = new Date();
  const after = await tableReadings(stack.pool, stack.schema);
  const delta = (table: string, pick: (r: TableReading) => number): number =>
    (after.get(table) ? pick(after.get(table)!) : 0) - (before.get(table) ? pick(before.get(table)!) : 0);
  const scheduler = countEvents(await eventsInWindow(stack.client, schedulerWorkflowId(account.carrier.id, stack.ref.workflowIdPrefix), from, to));
  // Served as the API serves it: a priorityRequested update (older code: a requestCheck update and its activity).
  const kinds = ['update accepted', 'activity scheduled', 'activity retried'];
  const byKind = Object.fromEntries(kinds.map((kind) => [kind, round((scheduler.actionsByKind[kind] ?? 0) / REQUEST_CHECKS, 2)]));
  context.log(`request-checks: ${JSON.stringify(answered)}`);
  return {
    sent: REQUEST_CHECKS,
    answered,
    priorityItemRowsPerRequest: round(delta('polling_priority_item', (r) => r.rows) / REQUEST_CHECKS, 2),
    auditRowsPerRequest: round(delta('audit_log', (r) => r.rows) / REQUEST_CHECKS, 2),
    priorityItemUpdatesPerRequest: round(delta('polling_priority_item', (r) => r.updated) / REQUEST_CHECKS, 2),
    schedulerActionsPerRequest: round(kinds.reduce((sum, kind) => sum + (scheduler.actionsByKind[kind] ?? 0), 0) / REQUEST_CHECKS, 2),
    schedulerActionsByKind: byKind,
  };
}

async function measurePolling(context: ScenarioContext, startMode: StartMode, withRequests: boolean): Promise<PollingRun> {
  const log = (line: string): void => context.log(`${startMode}: ${line}`);
  const stack = await createBenchStack(context.config, `fp-${startMode}`, { cardStartMode: startMode });
  try {
    const one = await seedAccount(stack, pollSpec(`fp-${startMode}-1type`, ONE_TYPE));
    const three = await seedAccount(stack, pollSpec(`fp-${startMode}-3types`, THREE_TYPES));
    const accounts = [one, three];
    for (const account of accounts) await spreadDues(stack, account);
    await stack.startOrchestration();
    const seconds = windowSeconds(context, { warmupSec: 20, durationSec: 60 });
    let before = new Map<string, TableReading>();
    const window = await measureWindow(stack, { warmupSec: seconds.warmupSec, durationSec: seconds.durationSec }, log, async () => {
      before = await tableReadings(stack.pool, stack.schema);
    });
    // Statistics reach pg_stat_user_tables a moment after commit: let the window's settle.
    await sleep(2000);
    const after = await tableReadings(stack.pool, stack.schema);
    const postgres = tableCosts(before, after);
    const widths = await rowWidths(stack.pool, window.from, window.to, accounts);
    log(`${postgres.executions} executions recorded in the window; reading histories`);
    const cardRuns = [await cardRunCost(stack, window.from, window.to, 1), await cardRunCost(stack, window.from, window.to, 3)];
    const schedulers = [await schedulerCost(stack, one, window.from, window.to), await schedulerCost(stack, three, window.from, window.to)];
    const control = countEvents(await eventsInWindow(stack.client, pollingControlWorkflowId(stack.ref.workflowIdPrefix), window.from, window.to));
    const redis = await steadyRedis(stack, accounts);
    const requestChecks = withRequests ? await measureRequestChecks(context, stack, one) : null;
    return {
      startMode,
      windowSeconds: round(window.seconds),
      executions: postgres.executions,
      executionsPerSecond: round(postgres.executions / window.seconds, 1),
      postgres,
      widths,
      cardRuns,
      schedulers,
      pollingControl: { windowSeconds: round(window.seconds), counts: control },
      redis,
      requestChecks,
      cpu: cpuNote(window.cpu),
    };
  } finally {
    await stack.close();
  }
}

// ---------------------------------------------------------------------------------------------
// The scenario

function schedulerShare(run: PollingRun, account: number): EventCounts {
  return run.schedulers[account]?.perExecution ?? emptyCounts();
}

export const footprint: Scenario = async (context) => {
  context.log('Redis: seeding and claiming');
  const redis = await measureRedis(context);
  const runs: PollingRun[] = [];
  for (const [index, mode] of context.options.startModes.entries()) {
    context.log(`polling run, CARD_START_MODE=${mode}`);
    runs.push(await measurePolling(context, mode, index === 0));
  }
  const first = runs[0]!;
  const tables: Table[] = [];
  tables.push({
    headers: ['account', 'types', 'state', 'cards', 'due hash B/card', 'lane B/card', 'claim+exec B/card', 'fin B/card', 'total B/card', 'keys/card'],
    numeric: [false, true, false, true, true, true, true, true, true, true],
    rows: [
      ...redis.seeded.map((s) => [
        s.account,
        s.types,
        'seeded (lifecycle import)',
        s.cards,
        round(s.keys.due.bytes / s.cards, 1),
        round((s.keys.queue.bytes + s.keys.prio.bytes) / s.cards, 1),
        0,
        0,
        s.bytesPerCard,
        s.keysPerCard,
      ]),
      [
        'fpr4',
        4,
        'claimed + exec right (added)',
        redis.claimed.claimed,
        round(redis.claimed.delta.due.bytes / Math.max(1, redis.claimed.claimed), 1),
        round((redis.claimed.delta.queue.bytes + redis.claimed.delta.prio.bytes + redis.claimed.delta.running.bytes) / Math.max(1, redis.claimed.claimed), 1),
        round((redis.claimed.delta.claim.bytes + redis.claimed.delta.exec.bytes) / Math.max(1, redis.claimed.claimed), 1),
        0,
        redis.claimed.bytesPerClaimedCard,
        round((redis.claimed.delta.claim.keys + redis.claimed.delta.exec.keys) / Math.max(1, redis.claimed.claimed), 2),
      ],
      ...first.redis.map((r) => [
        r.account,
        r.types,
        `after ~${Math.round(first.windowSeconds + (context.options.warmupSec ?? 20))} s of polling`,
        r.cards,
        r.dueBytesPerCard,
        r.laneBytesPerCard,
        round((r.keys.claim.bytes + r.keys.exec.bytes) / r.cards, 1),
        round(r.keys.fin.bytes / r.cards, 1),
        round((r.keys.due.bytes + r.keys.queue.bytes + r.keys.prio.bytes + r.keys.claim.bytes + r.keys.exec.bytes + r.keys.fin.bytes) / r.cards, 1),
        round((r.keys.due.keys + r.keys.claim.keys + r.keys.exec.keys + r.keys.fin.keys) / r.cards, 2),
      ]),
    ],
  });
  tables.push({
    headers: ['table', 'rows / execution', 'updates / execution', 'HOT share', 'bytes / row (heap+index)', 'index bytes / row', 'bytes / execution'],
    numeric: [false, true, true, true, true, true, true],
    rows: first.postgres.tables.map((t) => [
      t.table,
      t.rowsPerExecution,
      t.updatesPerExecution,
      t.hotUpdateShare ?? '',
      t.bytesPerRow ?? '',
      t.indexBytesPerRow ?? '',
      t.bytesPerExecution,
    ]),
  });
  const temporalRows: (string | number)[][] = [];
  for (const run of runs) {
    for (const [index, cost] of run.cardRuns.entries()) {
      const share = schedulerShare(run, index);
      temporalRows.push([
        run.startMode,
        cost.types,
        cost.shape.sampled,
        cost.perRun.events,
        cost.perRun.workflowTasks,
        cost.perRun.activityTasks,
        cost.perRun.localActivities,
        cost.perRun.actions,
        share.events,
        share.workflowTasks,
        share.actions,
        round(cost.perRun.actions + share.actions, 2),
      ]);
    }
  }
  tables.push({
    headers: [
      'start',
      'types',
      'runs read',
      'events / run',
      'workflow tasks / run',
      'activity tasks / run',
      'local activities / run',
      'actions / run',
      'scheduler events / exec',
      'scheduler WFTs / exec',
      'scheduler actions / exec',
      'actions / execution (total)',
    ],
    numeric: [false, true, true, true, true, true, true, true, true, true, true, true],
    rows: temporalRows,
  });
  tables.push({
    headers: [
      'start',
      'account',
      'claim rounds',
      'executions',
      'executions / round',
      'events / round',
      'workflow tasks / round',
      'actions / round',
      'actions by kind / round',
    ],
    numeric: [false, false, true, true, true, true, true, true, false],
    rows: runs.flatMap((run) =>
      run.schedulers.map((s) => [
        run.startMode,
        s.account,
        s.rounds,
        s.executions,
        s.rounds > 0 ? round(s.executions / s.rounds, 2) : 0,
        s.perRound.events,
        s.perRound.workflowTasks,
        s.perRound.actions,
        Object.entries(s.perRound.actionsByKind)
          .map(([kind, n]) => `${kind} ${n}`)
          .join(', '),
      ]),
    ),
  });
  const rc = first.requestChecks;
  if (rc) {
    tables.push({
      headers: [
        'request-checks',
        'answers',
        'priority item rows / request',
        'priority item updates / request',
        'audit rows / request',
        'scheduler actions / request',
      ],
      numeric: [true, false, true, true, true, true],
      rows: [
        [
          rc.sent,
          JSON.stringify(rc.answered),
          rc.priorityItemRowsPerRequest,
          rc.priorityItemUpdatesPerRequest,
          rc.auditRowsPerRequest,
          rc.schedulerActionsPerRequest,
        ],
      ],
    });
  }
  const exec = first.widths;
  const control = first.pollingControl;
  return {
    title: 'per-unit costs for the capacity model (Redis bytes per card, PostgreSQL rows and bytes per execution, Temporal events and actions per execution)',
    explain: [
      'These figures count bytes, rows, history events and actions, not time: they do not depend on how fast or busy ' +
        "the machine is (only the run's duration does).",
      `Redis: ${REDIS_CARDS} cards with 1 type (card_status) and ${REDIS_CARDS} with 4 (card_status, carddata, ` +
        `realname, package), created through LifecycleService.createCards (PostgreSQL rows, then upsert.lua); MEMORY ` +
        `USAGE … SAMPLES 0 summed over every key of the account (SCAN of its hash-tagged prefix), by kind of key ` +
        `(src/redis/keys.ts). "claimed + exec right": claim.lua rounds took all 4-type cards and acquireExec.lua gave ` +
        `each an execution right — the bytes those add per card while a run holds it.`,
      `Polling run: 2 accounts × ${POLL_CARDS} cards, every type every ${POLL_INTERVAL_SEC} s (dues spread over the ` +
        `interval; the 3-type account's types due together so each execution runs all three), budgets ${POLL_QPS} QPS ` +
        `per group, simulator latency p50 20 ms, error rate 0, sync ingest; the real stack (bench/lib/stack.ts: ` +
        `carrierScheduler, cardCheck, gateway steps as local activities, PostgreSQL records).`,
      "PostgreSQL: per table of the run's schema, exact row counts and pg_total_relation_size (heap + TOAST + " +
        "indexes) at the window's start and end; updates from pg_stat_user_tables divided by card_execution inserts " +
        'from the same statistics. Bytes per execution = size growth ÷ executions recorded in the window.',
      `Temporal: up to ${HISTORY_SAMPLE} completed successful card runs per shape, fetchHistory (events, ` +
        `WorkflowTaskCompleted, ActivityTaskStarted, MarkerRecorded = local activities); the schedulers' events inside ` +
        `the window (every run, continue-as-new included) ÷ the account's executions started in it; claim rounds = the ` +
        `loop's timers.`,
      "Actions (Temporal Cloud's billing unit, https://docs.temporal.io/cloud/actions): workflow started 1 (client, " +
        "child, continue-as-new); a child start's intent 1 more (the doc counts 2 per child start); activity scheduled " +
        '1, each retry 1; all local activities of one workflow task 1 together, plus non-first local attempts and ' +
        'each workflow-task heartbeat; timer 1; signal 1; accepted update 1; search-attribute upsert 1 (those given at ' +
        'start are free); bench/lib/actions.ts. Queries (status, dashboard) are billed too but are not in history.',
    ],
    config: {
      redisCards: REDIS_CARDS,
      redisIntervalSec: REDIS_INTERVAL_SEC,
      pollCards: POLL_CARDS,
      pollIntervalSec: POLL_INTERVAL_SEC,
      pollQps: POLL_QPS,
      startModes: context.options.startModes.join(','),
      historySample: HISTORY_SAMPLE,
      requestChecks: REQUEST_CHECKS,
      GATEWAY_STEPS: context.config.GATEWAY_STEPS,
    },
    results: { redis, runs },
    tables,
    verdicts: [],
    notes: [
      `Due hashes are ${redis.encoding}-encoded (small hashes); a card's hash grows after its first checks (ok:t per ` +
        `type, fail/err/ffail on failures), so the "after polling" rows are the steady-state figure and the seeded ` +
        `rows the floor.`,
      `INFO used_memory grew ${redis.usedMemoryDeltaPerCard} B per seeded card (the shared Redis also serves other ` +
        `users, so this is a cross-check: it adds the keyspace's hash-table slots and expiry entries that MEMORY USAGE ` +
        `leaves out).`,
      `Observation rows per execution by account: ${Object.entries(exec.observationsPerExecution)
        .map(([name, n]) => `${name} ${n}`)
        .join(', ')}; row datum sizes: card_execution ${Object.entries(exec.executionByTypes)
        .map(([n, w]) => `${n} type(s) ${w.meanBytes} B`)
        .join(', ')}; card_observation ${Object.entries(exec.observationByType)
        .map(([type, w]) => `${type} ${w.meanBytes} B`)
        .join(', ')}.`,
      `Observation partitions in the schema: ${exec.partitions.map((p) => `${p.name} ${p.bound}`).join('; ')} — ` +
        `created by the migration (3 months from the day it ran) plus DEFAULT; nothing in the code creates later ` +
        `months or drops old ones (see docs/capacity.md).`,
      `Per account, not per card, after polling: ` +
        `${first.redis
          .map(
            (r) =>
              `${r.account} running ${r.keys.running.bytes} B, ` +
              `rate limiter ${r.keys.rateLimit.bytes} B (${r.keys.rateLimit.keys} keys), engine ${r.keys.engine.bytes} B`,
          )
          .join('; ')}. ` +
        `The limiter ZSET holds about one member per call of the last second, so it grows with the group's QPS, not ` +
        `with cards.`,
      `pollingControl over the window (${control.windowSeconds} s): ${control.counts.events} events, ` +
        `${control.counts.workflowTasks} workflow tasks, ${control.counts.actions} actions (${Object.entries(control.counts.actionsByKind)
          .map(([kind, n]) => `${kind} ${n}`)
          .join(', ')}) — per deployment, not per card.`,
      ...(rc
        ? [
            `Request-checks: scheduler actions per request by kind ${JSON.stringify(rc.schedulerActionsByKind)}; the ` +
              `execution each request causes costs what any execution costs.`,
          ]
        : []),
      ...runs.map(
        (run) =>
          `${run.startMode}: ${run.executions} executions in ${run.windowSeconds} s (${run.executionsPerSecond}/s ` +
          `offered ~${round((2 * POLL_CARDS) / POLL_INTERVAL_SEC, 1)}/s). ${run.cpu}`,
      ),
    ],
  };
};
