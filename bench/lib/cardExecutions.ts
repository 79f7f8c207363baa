/**
 * One measurement of the card-execution path through the whole stack (carrierScheduler claims,
 * cardCheck or cardBatch runs as CARD_RUN_SHAPE says, gateway calls, PostgreSQL records) under the
 * throughput workload: executions (checks) per second the orchestration sustains, and what each
 * costs — history events, workflow tasks and actions per run and per check (a sample of runs plus
 * the schedulers' share: bench/lib/checkCost.ts), Redis commands and SQL statements this process
 * sent, CPU per process.
 * Used by throughput (every variant), ceiling (the card shape) and the capacity the load scenarios
 * size from.
 */
import { connectRedis } from '../../src/redis/connect.js';
import { schedulerStatus } from '../../src/app/temporalControl.js';
import type { Pool } from '../../src/db/pool.js';
import type { ScenarioContext } from './context.js';
import type { RunShape, Shape, StartMode } from './options.js';
import { createBenchStack, type BenchStack } from './stack.js';
import { seedAccount } from './seed.js';
import { measureWindow } from './window.js';
import { countRedisCommands, countSqlStatements } from './measure.js';
import { historyShape, type HistoryShape } from './history.js';
import { measureCheckCost, settledExecutionsBetween, type CheckCost } from './checkCost.js';
import type { CpuTimes } from './processes.js';
import { round, sleep } from './stats.js';
import { throughputSpecs, typesPerExecution } from '../scenarios/throughputLoad.js';

/** Card runs whose histories are fetched to count events and workflow tasks. */
const HISTORY_SAMPLE = 20;

export interface CardRunSpec {
  readonly startMode: StartMode;
  readonly shape: Shape;
  /** CARD_RUN_SHAPE of the stack's workers (default `card`). */
  readonly runShape?: RunShape;
  readonly warmupSec: number;
  readonly durationSec: number;
}

export interface CardRunResult extends CardRunSpec {
  readonly runShape: RunShape;
  readonly date: string;
  readonly windowSeconds: number;
  readonly executions: number;
  readonly executionsPerSecond: number;
  readonly gatewayCallsPerSecond: number;
  /** Executions in the window by the number of types they ran (1, 3, …). */
  readonly typesPerExecution: Record<string, number>;
  /** Per run (card shape: per execution) — a batch run carries many checks. */
  readonly history: HistoryShape;
  /** Events, workflow tasks and actions per check, card runs' and schedulers' shares. */
  readonly checkCost: CheckCost;
  readonly cpuShares: CpuTimes;
  readonly cost: {
    readonly redisCommandsPerExecution: number;
    readonly redisCommandsByName: Record<string, number>;
    readonly serverWideRedisCallsPerExecution: number;
    readonly sqlStatementsPerExecution: number;
    readonly cpuMsPerExecution: CpuTimes;
  };
  /** The stack's orchestration settings as the workers received them. */
  readonly settings: Readonly<Record<string, unknown>>;
  /** Each account's scheduler view at the end of the window: what limited it, the adaptive limit, start lag, expired leases. */
  readonly schedulers: readonly SchedulerSnapshot[];
}

export interface SchedulerSnapshot {
  readonly carrierId: string;
  readonly limitedBy: string;
  readonly inflightLimit: number;
  readonly startLagMs: number;
  /** Run creation to first task (the engine's queue); null from a scheduler of older code. */
  readonly queueLagMs: number | null;
  readonly capacityPerSec: number | null;
  /** Smoothed starts/s and the fair rate of a saturated engine (null: no bound; absent from older code). */
  readonly startsPerSec: number;
  readonly fairRatePerSec: number | null;
  readonly expiredLeases: number;
}

export async function schedulerSnapshots(stack: BenchStack, carrierIds: readonly string[]): Promise<SchedulerSnapshot[]> {
  const views = await Promise.all(carrierIds.map((id) => schedulerStatus(stack.ref, id).catch(() => undefined)));
  return views.flatMap((view) =>
    view
      ? [
          {
            carrierId: view.carrierId,
            limitedBy: view.orchestration.limitedBy,
            inflightLimit: view.orchestration.inflightLimit,
            startLagMs: view.orchestration.startLagMs,
            queueLagMs: view.orchestration.queueLagMs ?? null,
            capacityPerSec: view.orchestration.capacityPerSec,
            startsPerSec: view.orchestration.startsPerSec,
            fairRatePerSec: view.orchestration.fairRatePerSec ?? null,
            expiredLeases: view.expiredLeases,
          },
        ]
      : [],
  );
}

/** Server-wide command calls from INFO commandstats (includes other users of the shared Redis). */
async function serverCommandCalls(redisUrl: string): Promise<number> {
  const redis = await connectRedis(redisUrl, { connectionName: 'bench-commandstats' });
  try {
    const info = await redis.info('commandstats');
    return [...info.matchAll(/calls=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  } finally {
    await redis.quit();
  }
}

/** Runs of the window with a successful execution of the shape's full set of types (a batch run once, however many it recorded). */
async function sampleRuns(pool: Pool, from: Date, to: Date, types: number): Promise<{ workflowId: string; runId: string }[]> {
  const { rows } = await pool.query<{ workflow_id: string; run_id: string }>(
    `SELECT workflow_id, run_id FROM (SELECT DISTINCT workflow_id, run_id FROM card_execution
      WHERE started_at >= $1 AND started_at < $2 AND outcome = 'success' AND cardinality(types) = $3) runs
      ORDER BY random() LIMIT $4`,
    [from, to, types, HISTORY_SAMPLE],
  );
  return rows.map((row) => ({ workflowId: row.workflow_id, runId: row.run_id }));
}

async function typesHistogram(pool: Pool, from: Date, to: Date): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ n: number; executions: string }>(
    'SELECT cardinality(types) AS n, count(*)::text AS executions FROM card_execution WHERE started_at >= $1 AND started_at < $2 GROUP BY 1 ORDER BY 1',
    [from, to],
  );
  return Object.fromEntries(rows.map((row) => [String(row.n), Number(row.executions)]));
}

/** Settings that shape a card execution, read without assuming which ones this code version has. */
function orchestrationSettings(config: object): Record<string, unknown> {
  const all = config as Readonly<Record<string, unknown>>;
  const keys = [
    'CARD_START_MODE',
    'CARD_RUN_SHAPE',
    'CARD_BATCH_SIZE',
    'GATEWAY_STEPS',
    'WORKER_CARD_MAX_WORKFLOWS',
    'WORKER_CARD_MAX_ACTIVITIES',
    'WORKER_GATEWAY_MAX_ACTIVITIES',
  ];
  return Object.fromEntries(keys.filter((key) => key in all).map((key) => [key, all[key]]));
}

export async function measureCardExecutions(context: ScenarioContext, spec: CardRunSpec, label: string): Promise<CardRunResult> {
  const log = (line: string): void => context.log(`${label}: ${line}`);
  const runShape = spec.runShape ?? 'card';
  const stack = await createBenchStack(context.config, `tp-${spec.startMode}-${spec.shape}-${runShape}`, {
    cardStartMode: spec.startMode,
    cardRunShape: runShape,
  });
  try {
    const carrierIds: string[] = [];
    for (const account of throughputSpecs(`tp${spec.shape[0]}`, spec.shape, runShape)) carrierIds.push((await seedAccount(stack, account)).carrier.id);
    const redisCommands = countRedisCommands(stack.deps.redis);
    const sql = countSqlStatements();
    await stack.startOrchestration();
    log(`warm-up ${spec.warmupSec} s`);
    await sleep(spec.warmupSec * 1000);
    const redisBefore = redisCommands.count();
    const redisByNameBefore = redisCommands.byName();
    const sqlBefore = sql.count();
    const serverBefore = await serverCommandCalls(context.config.REDIS_URL);
    const window = await measureWindow(stack, { warmupSec: 0, durationSec: spec.durationSec }, log);
    const redisDelta = redisCommands.count() - redisBefore;
    const sqlDelta = sql.count() - sqlBefore;
    const serverDelta = (await serverCommandCalls(context.config.REDIS_URL)) - serverBefore;
    const byName: Record<string, number> = {};
    for (const [name, n] of Object.entries(redisCommands.byName())) {
      const delta = n - (redisByNameBefore[name] ?? 0);
      if (delta > 0) byName[name] = delta;
    }
    const schedulers = await schedulerSnapshots(stack, carrierIds);
    const schedulerLines = schedulers.map((s) => `#${s.carrierId} ${s.limitedBy} limit ${s.inflightLimit} lag ${s.startLagMs} ms expired ${s.expiredLeases}`);
    log(`schedulers: ${schedulerLines.join('; ')}`);
    const executions = await settledExecutionsBetween(stack.pool, window.from, window.to);
    const sumCalls = (calls: typeof window.end.calls): number =>
      Object.values(calls).reduce((n, groups) => n + Object.values(groups).reduce((m, g) => m + g.calls, 0), 0);
    const gatewayCalls = sumCalls(window.end.calls) - sumCalls(window.start.calls);
    // Runs recorded late in the window may still be completing: a short pause before reading histories.
    await sleep(1000);
    const history = await historyShape(stack.client, await sampleRuns(stack.pool, window.from, window.to, typesPerExecution(spec.shape)));
    const checkCost = await measureCheckCost(stack, { runShape, types: typesPerExecution(spec.shape), carrierIds }, window.from, window.to);
    const per = (n: number): number => (executions > 0 ? round(n / executions, 2) : 0);
    const cpuMsPer = (share: number): number => (executions > 0 ? round((share * window.seconds * 1000) / executions, 2) : 0);
    return {
      ...spec,
      runShape,
      date: window.from.toISOString(),
      windowSeconds: round(window.seconds),
      executions,
      executionsPerSecond: round(executions / window.seconds, 1),
      gatewayCallsPerSecond: round(gatewayCalls / window.seconds, 1),
      typesPerExecution: await typesHistogram(stack.pool, window.from, window.to),
      history,
      checkCost,
      cpuShares: window.cpu,
      cost: {
        redisCommandsPerExecution: per(redisDelta),
        redisCommandsByName: Object.fromEntries(Object.entries(byName).map(([name, n]) => [name, per(n)])),
        serverWideRedisCallsPerExecution: per(serverDelta),
        sqlStatementsPerExecution: per(sqlDelta),
        cpuMsPerExecution: {
          temporal: cpuMsPer(window.cpu.temporal),
          bench: cpuMsPer(window.cpu.bench),
          simulator: cpuMsPer(window.cpu.simulator),
          postgres: cpuMsPer(window.cpu.postgres),
          redis: cpuMsPer(window.cpu.redis),
          temporalStore: cpuMsPer(window.cpu.temporalStore),
        },
      },
      settings: orchestrationSettings(stack.config),
      schedulers,
    };
  } finally {
    await stack.close();
  }
}

/** Did the variant run the way it was asked to? Child starts have a parent in their history. */
export function startModeCheck(result: CardRunResult): string | undefined {
  const h = result.history;
  if (h.sampled === 0) return `no completed ${result.shape}-type execution to sample: the start mode could not be confirmed`;
  if (result.startMode === 'client' && h.withParent > 0)
    return `CARD_START_MODE=client did not take effect: ${h.withParent} of ${h.sampled} sampled runs were started as children`;
  if (result.startMode === 'child' && h.withParent < h.sampled)
    return `${h.sampled - h.withParent} of ${h.sampled} sampled runs had no parent although CARD_START_MODE=child`;
  return undefined;
}
