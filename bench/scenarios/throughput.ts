/**
 * throughput: budgets high, simulator latency ~0 → card executions per second the orchestration
 * sustains on this machine, the CPU each process spent, and what one execution costs: Temporal
 * history events (a sample of card-<id> runs), Redis commands this process sent, SQL statements.
 */
import type { Client } from '@temporalio/client';
import { connectRedis } from '../../src/redis/connect.js';
import { windowSeconds, type Scenario } from '../lib/context.js';
import { createBenchStack } from '../lib/stack.js';
import { seedAccount } from '../lib/seed.js';
import { cpuNote, measureWindow } from '../lib/window.js';
import { countRedisCommands, countSqlStatements, executionsBetween } from '../lib/measure.js';
import { round, sleep } from '../lib/stats.js';
import type { Pool } from '../../src/db/pool.js';
import { THROUGHPUT_CONFIG, throughputSpecs } from './throughputLoad.js';

/** Card runs whose histories are fetched to count events. */
const HISTORY_SAMPLE = 20;

async function historyEvents(client: Client, pool: Pool, from: Date, to: Date): Promise<{ sampled: number; mean: number; min: number; max: number }> {
  const { rows } = await pool.query<{ workflow_id: string; run_id: string }>(
    `SELECT workflow_id, run_id FROM card_execution WHERE started_at >= $1 AND started_at < $2 AND outcome = 'success' ORDER BY random() LIMIT $3`,
    [from, to, HISTORY_SAMPLE],
  );
  const counts: number[] = [];
  for (const row of rows) {
    const history = await client.workflow.getHandle(row.workflow_id, row.run_id).fetchHistory();
    counts.push(history.events?.length ?? 0);
  }
  if (counts.length === 0) return { sampled: 0, mean: 0, min: 0, max: 0 };
  return { sampled: counts.length, mean: round(counts.reduce((a, b) => a + b, 0) / counts.length, 1), min: Math.min(...counts), max: Math.max(...counts) };
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

export const throughput: Scenario = async (context) => {
  const seconds = windowSeconds(context, { warmupSec: 20, durationSec: 45 });
  const stack = await createBenchStack(context.config, 'throughput');
  try {
    for (const spec of throughputSpecs('tp')) await seedAccount(stack, spec);
    const redisCommands = countRedisCommands(stack.deps.redis);
    const sql = countSqlStatements();
    await stack.startOrchestration();
    context.log(`warm-up ${seconds.warmupSec} s`);
    await sleep(seconds.warmupSec * 1000);
    const redisBefore = redisCommands.count();
    const redisByNameBefore = redisCommands.byName();
    const sqlBefore = sql.count();
    const serverBefore = await serverCommandCalls(context.config.REDIS_URL);
    const window = await measureWindow(stack, { warmupSec: 0, durationSec: seconds.durationSec }, context.log);
    const redisDelta = redisCommands.count() - redisBefore;
    const sqlDelta = sql.count() - sqlBefore;
    const serverDelta = (await serverCommandCalls(context.config.REDIS_URL)) - serverBefore;
    const byName: Record<string, number> = {};
    for (const [name, n] of Object.entries(redisCommands.byName())) {
      const delta = n - (redisByNameBefore[name] ?? 0);
      if (delta > 0) byName[name] = delta;
    }

    const executions = await executionsBetween(stack.pool, window.from, window.to);
    const perSecond = executions / window.seconds;
    const events = await historyEvents(stack.client, stack.pool, window.from, window.to);
    const gatewayCalls = Object.values(window.end.calls).reduce((n, groups) => n + Object.values(groups).reduce((m, g) => m + g.calls, 0), 0) -
      Object.values(window.start.calls).reduce((n, groups) => n + Object.values(groups).reduce((m, g) => m + g.calls, 0), 0);
    const per = (n: number): number => (executions > 0 ? round(n / executions, 2) : 0);
    const cpuMsPer = (share: number): number => (executions > 0 ? round((share * window.seconds * 1000) / executions, 2) : 0);
    const cost = {
      historyEvents: events,
      redisCommandsPerExecution: per(redisDelta),
      redisCommandsByName: byName,
      serverWideRedisCallsPerExecution: per(serverDelta),
      sqlStatementsPerExecution: per(sqlDelta),
      cpuMsPerExecution: { temporal: cpuMsPer(window.cpu.temporal), bench: cpuMsPer(window.cpu.bench), postgres: cpuMsPer(window.cpu.postgres), redis: cpuMsPer(window.cpu.redis) },
    };
    const totalCpu = window.cpu.temporal + window.cpu.bench + window.cpu.postgres + window.cpu.redis;
    const share = (v: number): string => `${totalCpu > 0 ? Math.round((v / totalCpu) * 100) : 0} %`;
    return {
      title: 'card executions per second and their cost',
      explain: [
        `${THROUGHPUT_CONFIG.accounts} accounts × ${THROUGHPUT_CONFIG.cardsPerAccount} cards due every ${THROUGHPUT_CONFIG.intervalSec} s, budget ${THROUGHPUT_CONFIG.qps} QPS each, gateway latency p50 ${THROUGHPUT_CONFIG.latencyMs.p50} ms: the backlog never drains.`,
        'Executions = card_execution rows that started in the window. Redis commands and SQL statements: sent by this process (the four workers run in it). CPU ms per execution: process CPU in the window ÷ executions.',
      ],
      config: { ...seconds, ...THROUGHPUT_CONFIG, workerCardMaxWorkflows: stack.config.WORKER_CARD_MAX_WORKFLOWS, workerGatewayMaxActivities: stack.config.WORKER_GATEWAY_MAX_ACTIVITIES },
      results: { windowSeconds: round(window.seconds), executions, executionsPerSecond: round(perSecond, 1), gatewayCallsPerSecond: round(gatewayCalls / window.seconds, 1), cpuShares: window.cpu, cost },
      tables: [
        {
          headers: ['executions/s', 'gateway calls/s', 'history events / exec', 'Redis cmds / exec', 'SQL stmts / exec', 'Temporal CPU ms / exec', 'workers+sim CPU ms / exec', 'PostgreSQL CPU ms / exec', 'Redis CPU ms / exec'],
          numeric: [true, true, true, true, true, true, true, true, true],
          rows: [[round(perSecond, 1), round(gatewayCalls / window.seconds, 1), events.mean, cost.redisCommandsPerExecution, cost.sqlStatementsPerExecution, cost.cpuMsPerExecution.temporal, cost.cpuMsPerExecution.bench, cost.cpuMsPerExecution.postgres, cost.cpuMsPerExecution.redis]],
        },
      ],
      misses: [],
      notes: [
        cpuNote(window.cpu),
        `Of the CPU the stack used: Temporal server ${share(window.cpu.temporal)}, workers + simulator ${share(window.cpu.bench)}, PostgreSQL ${share(window.cpu.postgres)}, Redis ${share(window.cpu.redis)}.`,
        `Each execution is a workflow run of ~${events.mean} history events (sample of ${events.sampled}, ${events.min}–${events.max}): start, workflow tasks, the gateway activity, the ingest activity, local-activity markers — each a persisted write in the dev server's SQLite.`,
        `Redis per execution (this process): ${Object.entries(byName).map(([name, n]) => `${name} ${per(n)}`).join(', ')}; server-wide ${cost.serverWideRedisCallsPerExecution} calls/execution including other users.`,
      ],
    };
  } finally {
    await stack.close();
  }
};
