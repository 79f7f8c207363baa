/**
 * ingest: the same offered load written by sync ingest (each card worker writes its own record)
 * and by async ingest (records handed to the stream, written in batches across executions), then
 * a PostgreSQL pause in async mode.
 *
 * - rows/s: execution rows + observation rows that reached PostgreSQL per second of the window;
 * - SQL statements per execution: every statement this process sent in the window (claim rounds,
 *   preparation, records) ÷ executions written in it — the same load, so the difference is the
 *   ingest's;
 * - pause: the ingest's tables are locked for BENCH_INGEST_PAUSE_SEC (default 60 s) — writes
 *   stall, nothing errors, polling goes on — and the backlog (records pending, oldest age), the
 *   in-flight limit claiming gets under backpressure, the gateway calls per second (polling goes
 *   on) and the alert are sampled every second until the backlog has drained.
 *
 * The lock stalls the ingest's batches without failing them, each holding a pool connection; the
 * ingest takes at most the pool's size minus a few (src/ingest/service.ts `writerSlots`), so the
 * card and control workers of this one-process stack still read what they need and polling goes
 * on (before that, the stalled batches took the whole pool and the backlog stayed flat: polling
 * had stopped). A PostgreSQL that is stopped outright (connections refused) is the fault suite's
 * test/faults-suite/ingestOutage.test.ts: there the hot path runs on stale reference data and
 * remembered card rows.
 */
import { windowSeconds, type Scenario } from './lib/context.js';
import { createBenchStack, type BenchStack } from './lib/stack.js';
import { seedAccount } from './lib/seed.js';
import { countSqlStatements } from './lib/measure.js';
import { round, sleep } from './lib/stats.js';
import { atLeast, perSecond, plain } from './lib/verdict.js';
import { switchIngestMode } from '../src/ingest/mode.js';
import { createIngestPressure, type IngestPressure } from '../src/ingest/pressure.js';
import { ingestSettings } from '../src/ingest/service.js';
import { IngestStream } from '../src/ingest/stream.js';
import type { IngestMode } from '../src/db/systemConfig.js';

const CARDS = Number(process.env.BENCH_INGEST_CARDS ?? 1500);
const INTERVAL_SEC = 5;
const PAUSE_SEC = Number(process.env.BENCH_INGEST_PAUSE_SEC ?? 60);
/** How long after the pause the backlog may take to drain before the run gives up waiting. */
const DRAIN_LIMIT_SEC = 300;

interface ModeFigures {
  readonly mode: IngestMode;
  readonly seconds: number;
  readonly executions: number;
  readonly observations: number;
  readonly rowsPerSec: number;
  readonly executionsPerSec: number;
  readonly statementsPerExecution: number;
  readonly backlogMax: number;
}

interface PauseSample {
  readonly t: number;
  readonly phase: 'paused' | 'draining';
  readonly records: number;
  readonly oldestAgeSec: number;
  readonly inflightLimit: number;
  /** Gateway calls the simulator answered in the second before the sample (polling goes on). */
  readonly callsPerSec: number;
  readonly alertOpen: boolean;
}

async function rowCounts(stack: BenchStack): Promise<{ executions: number; observations: number }> {
  const { rows } = await stack.pool.query<{ e: number; o: number }>(
    'SELECT (SELECT count(*)::int FROM card_execution) AS e, (SELECT count(*)::int FROM card_observation) AS o',
  );
  return { executions: rows[0]!.e, observations: rows[0]!.o };
}

async function switchTo(stack: BenchStack, mode: IngestMode): Promise<void> {
  await switchIngestMode(stack.pool, mode, 'bench');
  // The workers of this stack share its reference cache: the switch applies at once.
  stack.deps.reference.invalidate();
}

async function measureMode(
  stack: BenchStack,
  stream: IngestStream,
  mode: IngestMode,
  warmupSec: number,
  durationSec: number,
  log: (line: string) => void,
): Promise<ModeFigures> {
  await switchTo(stack, mode);
  await sleep(warmupSec * 1000);
  const sql = countSqlStatements();
  const before = await rowCounts(stack);
  const statementsBefore = sql.count();
  const started = Date.now();
  let backlogMax = 0;
  while (Date.now() - started < durationSec * 1000) {
    await sleep(1000);
    backlogMax = Math.max(backlogMax, (await stream.backlog()).records);
  }
  const seconds = (Date.now() - started) / 1000;
  const after = await rowCounts(stack);
  // The closing row count is one statement of the bench's own, not the system's.
  const statements = sql.count() - statementsBefore - 1;
  const executions = after.executions - before.executions;
  const observations = after.observations - before.observations;
  const figures: ModeFigures = {
    mode,
    seconds: round(seconds, 1),
    executions,
    observations,
    rowsPerSec: round((executions + observations) / seconds, 1),
    executionsPerSec: round(executions / seconds, 1),
    statementsPerExecution: executions > 0 ? round(statements / executions, 2) : 0,
    backlogMax,
  };
  log(`${mode}: ${figures.rowsPerSec} rows/s, ${figures.executionsPerSec} executions/s, ${figures.statementsPerExecution} statements/execution`);
  return figures;
}

async function alertOpen(stack: BenchStack): Promise<boolean> {
  const { rows } = await stack.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM carrier_alert WHERE kind = 'ingest_backlog' AND status = 'open'");
  return rows[0]!.n > 0;
}

/** Gateway calls the simulator has answered so far, all accounts and groups. */
async function gatewayCalls(stack: BenchStack): Promise<number> {
  let calls = 0;
  for (const account of Object.values((await stack.simulator.stats({ cards: false })).accounts))
    for (const group of Object.values(account.groups)) calls += group.calls;
  return calls;
}

async function sample(
  stack: BenchStack,
  stream: IngestStream,
  pressure: IngestPressure,
  inflightLimit: number,
  t0: number,
  phase: PauseSample['phase'],
  calls: { last: number; at: number },
): Promise<PauseSample> {
  const backlog = await stream.backlog();
  const now = Date.now();
  const total = await gatewayCalls(stack);
  const callsPerSec = round((total - calls.last) / Math.max(0.001, (now - calls.at) / 1000), 1);
  calls.last = total;
  calls.at = now;
  return {
    t: Math.round((Date.now() - t0) / 1000),
    phase,
    records: backlog.records,
    oldestAgeSec: round(backlog.oldestAgeMs / 1000, 1),
    inflightLimit: await pressure.inflightLimit(inflightLimit),
    callsPerSec,
    alertOpen: await alertOpen(stack),
  };
}

/** Holds locks on the ingest's tables for `seconds` on a connection of its own: its writes stall. */
async function pauseIngestTables(stack: BenchStack, seconds: number, onSample: () => Promise<void>): Promise<void> {
  const client = await stack.pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('LOCK TABLE card_execution, card_observation IN EXCLUSIVE MODE');
    const until = Date.now() + seconds * 1000;
    while (Date.now() < until) {
      await sleep(1000);
      await onSample();
    }
    await client.query('COMMIT');
  } finally {
    client.release();
  }
}

export const ingest: Scenario = async (context) => {
  const { warmupSec, durationSec } = windowSeconds(context, { warmupSec: 20, durationSec: 60 });
  const stack = await createBenchStack(context.config, 'ingest');
  try {
    const inflightLimit = 200;
    const account = await seedAccount(stack, {
      name: 'ing1',
      qps: { status: 1000, data: 1000 },
      typeGroups: { card_status: 'status', carddata: 'data' },
      cards: CARDS,
      intervalsSec: { card_status: INTERVAL_SEC, carddata: INTERVAL_SEC },
      latencyMs: { p50: 5, p99: 20 },
      inflightLimit,
    });
    const stream = new IngestStream(stack.deps.redis, stack.namespace);
    const settings = ingestSettings(stack.config);
    const pressure = createIngestPressure(stream, settings.thresholds, { cacheMs: 0 });
    await stack.startOrchestration();
    context.log(`${CARDS} cards, card_status + carddata every ${INTERVAL_SEC} s (${round((CARDS / INTERVAL_SEC) * 2)} gateway calls/s offered)`);

    const sync = await measureMode(stack, stream, 'sync', warmupSec, durationSec, context.log);
    const async_ = await measureMode(stack, stream, 'async', warmupSec, durationSec, context.log);

    context.log(`pausing the ingest's tables for ${PAUSE_SEC} s`);
    const samples: PauseSample[] = [];
    const t0 = Date.now();
    const calls = { last: await gatewayCalls(stack), at: t0 };
    await pauseIngestTables(stack, PAUSE_SEC, async () => void samples.push(await sample(stack, stream, pressure, inflightLimit, t0, 'paused', calls)));
    const resumedAt = Date.now();
    let drainedAt: number | undefined;
    while (Date.now() - resumedAt < DRAIN_LIMIT_SEC * 1000) {
      await sleep(1000);
      const s = await sample(stack, stream, pressure, inflightLimit, t0, 'draining', calls);
      samples.push(s);
      if (drainedAt === undefined && s.records < settings.thresholds.records / 2 && s.inflightLimit === inflightLimit) drainedAt = Date.now();
      if (drainedAt !== undefined && !s.alertOpen) break;
    }
    const peak = samples.reduce((max, s) => Math.max(max, s.records), 0);
    const oldestPeak = samples.reduce((max, s) => Math.max(max, s.oldestAgeSec), 0);
    const minLimit = samples.reduce((min, s) => Math.min(min, s.inflightLimit), inflightLimit);
    const paused = samples.filter((s) => s.phase === 'paused');
    const pausedCallsPerSec = paused.length > 0 ? round(paused.reduce((sum, s) => sum + s.callsPerSec, 0) / paused.length, 1) : 0;
    const lastSample = samples[samples.length - 1];
    const every = Math.max(1, Math.round(samples.length / 30));
    return {
      title: `Ingest: sync vs async on the same load, and a ${PAUSE_SEC} s PostgreSQL pause`,
      explain: [
        `Load: ${CARDS} cards of one account, card_status + carddata every ${INTERVAL_SEC} s, budgets far above it ` +
          `(the engine is the limit), gateway latency p50 5 ms.`,
        'rows/s: card_execution + card_observation rows that reached PostgreSQL per second of the window.',
        'statements/execution: every SQL statement of the process in the window ÷ executions written.',
        `Pause: card_execution and card_observation locked (EXCLUSIVE) for ${PAUSE_SEC} s in async mode; thresholds ` +
          `${settings.thresholds.records} records / ${settings.thresholds.maxAgeMs / 1000} s.`,
      ],
      config: {
        cards: CARDS,
        intervalSec: INTERVAL_SEC,
        warmupSec,
        durationSec,
        pauseSec: PAUSE_SEC,
        concurrency: settings.concurrency,
        batchSize: settings.batchSize,
        thresholds: settings.thresholds,
        carrierId: account.carrier.id,
      },
      results: {
        sync,
        async: async_,
        pause: {
          peakRecords: peak,
          peakOldestAgeSec: oldestPeak,
          minInflightLimit: minLimit,
          pausedCallsPerSec,
          drainSec: drainedAt === undefined ? null : round((drainedAt - resumedAt) / 1000, 1),
          samples,
        },
      },
      tables: [
        {
          headers: ['mode', 'executions/s', 'rows/s', 'statements/execution', 'max backlog'],
          numeric: [false, true, true, true, true],
          rows: [sync, async_].map((m) => [m.mode, m.executionsPerSec, m.rowsPerSec, m.statementsPerExecution, m.backlogMax]),
        },
        {
          headers: ['t (s)', 'phase', 'backlog records', 'oldest (s)', 'in-flight limit', 'gateway calls/s', 'alert'],
          numeric: [true, false, true, true, true, true, false],
          rows: samples
            .filter((_, i) => i % every === 0 || i === samples.length - 1)
            .map((s) => [s.t, s.phase, s.records, s.oldestAgeSec, s.inflightLimit, s.callsPerSec, s.alertOpen ? 'open' : '—']),
        },
      ],
      // Polling goes on through the pause (the backlog grows), and the backlog drains after it
      // (docs/design.md, 'PostgreSQL and records': async).
      verdicts: [
        atLeast('gateway calls/s while the ingest is paused (polling goes on)', pausedCallsPerSec, 1, perSecond),
        // Grows well past what async mode holds unpaused (when stalled batches took the whole pool
        // it stayed flat at 24: polling had stopped).
        atLeast(
          'backlog peak during the pause (records)',
          peak,
          Math.max(100, 10 * async_.backlogMax),
          plain,
          `${round(peak / Math.max(1, settings.thresholds.records), 2)}× the alert threshold`,
        ),
        {
          what: 'backlog drained and alert resolved after the pause',
          figure: drainedAt === undefined ? `not within ${DRAIN_LIMIT_SEC} s` : `${round((drainedAt - resumedAt) / 1000, 1)} s`,
          target: `within ${DRAIN_LIMIT_SEC} s`,
          met: drainedAt !== undefined && lastSample !== undefined && !lastSample.alertOpen,
        },
      ],
      notes: [
        `async writes ${sync.rowsPerSec > 0 ? round(async_.rowsPerSec / sync.rowsPerSec, 2) : '—'}× the rows/s of sync with ` +
          `${sync.statementsPerExecution > 0 ? round(async_.statementsPerExecution / sync.statementsPerExecution, 2) : '—'}× ` +
          `the statements per execution.`,
        `Pause: backlog peaked at ${peak} records (oldest ${oldestPeak} s) with ${pausedCallsPerSec} gateway calls/s ` +
          `going on; claiming tightened to ${minLimit} in flight; ` +
          `${drainedAt === undefined ? `not drained within ${DRAIN_LIMIT_SEC} s` : `drained ${round((drainedAt - resumedAt) / 1000, 1)} s after the pause`}.`,
      ],
    };
  } finally {
    await stack.close();
  }
};
