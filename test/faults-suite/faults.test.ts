/**
 * Fault-injection suite (`npm run test:faults`, README.md 'Two commands'): one running system —
 * control, card, gateway and ingest workers as processes of their own from their entry points,
 * gateway steps on the queue, async ingest, the simulator as gateway behind a relay — on a private
 * PostgreSQL, Redis and Temporal dev server (test/faults/privateServices.ts), never the shared
 * ones. Each test injects one fault and then checks what must hold after any fault: polling resumes
 * by itself within a minute, every card is in exactly one lane or running, no duplicate
 * observations, the simulator saw no card executed twice at once and no window over budget, and
 * every priority item is terminal or has a next run.
 *
 * The faults share the system so setup is paid once; the 3-minute PostgreSQL outage runs last.
 */
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, stackEnv, type Stack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor, type SeedAccount } from '../../testkit/seed.js';
import { sharedBundleEnv } from '../../testkit/workflowBundle.js';
import { privatePostgres, privateRedis, privateTemporal, type PrivateService, type PrivateTemporal } from '../faults/privateServices.js';
import { ensurePollingControl } from '../../src/app/temporalControl.js';
import { setIngestMode } from '../../src/db/systemConfig.js';
import {
  killEntry,
  readInvariants,
  sleep,
  spawnEntry,
  startRelay,
  isRunning,
  waitUntilReady,
  writeTable,
  renderTable,
  type EntryProcess,
  type FaultRow,
  type Relay,
} from './harness.js';

/** Ports of the suite's own services (the shared ones are 5433, 6379 and 7233). */
const PG_PORT = 15433;
const REDIS_PORT = 16379;
const TEMPORAL_PORT = 17233;
const TEMPORAL_UI_PORT = 18233;
const CARDS = 8;
const QPS = { main: 30 };
const GATEWAY_ACCOUNT = 'faults1-gw';
/** Polling resumes by itself within a minute (docs/design.md, 'Failure handling': loops resume by themselves). */
const RESUME_MS = 60_000;
const STEP_TIMEOUT_MS = 1500;
const PG_OUTAGE_MS = Number(process.env.FAULTS_PG_OUTAGE_MS ?? 180_000);

const WORKER_KINDS = ['control', 'card', 'gateway', 'ingest'] as const;
type Kind = (typeof WORKER_KINDS)[number];

describe('fault-injection suite: one running system, one fault at a time', () => {
  let postgres: PrivateService | undefined;
  let redis: PrivateService | undefined;
  let temporal: PrivateTemporal | undefined;
  let stack: Stack | undefined;
  let relay: Relay | undefined;
  let bundleEnv: Record<string, string> = {};
  let account: SeedAccount | undefined;
  const workers = new Map<Kind, EntryProcess>();
  const rows: FaultRow[] = [];
  /** Simulator violations already charged to an earlier fault (its stats are cumulative). */
  const seenSimProblems = new Set<string>();
  const began = Date.now();
  const phase = (t: TestContext, what: string): void => t.diagnostic(`${((Date.now() - began) / 1000).toFixed(1)} s: ${what}`);

  const s = (): Stack => stack as Stack;
  const cardIds = (): string[] => (account as SeedAccount).cards.map((card) => card.id);
  const carrierId = (): string => (account as SeedAccount).carrier.id;

  function workerEnv(): Record<string, string> {
    return {
      ...stackEnv(s()),
      ...bundleEnv,
      // The gateway worker really runs the steps, and reaches the simulator through the relay.
      GATEWAY_STEPS: 'queue',
      GATEWAY_URL: (relay as Relay).url,
    };
  }

  async function startWorker(kind: Kind): Promise<void> {
    const entry = spawnEntry(`${kind} worker`, `src/workers/${kind}.ts`, workerEnv());
    workers.set(kind, entry);
    await waitUntilReady(entry, 'workers running');
  }

  before(async () => {
    const log = (): void => undefined;
    postgres = await privatePostgres(PG_PORT, log);
    redis = await privateRedis(REDIS_PORT, log);
    temporal = await privateTemporal(TEMPORAL_PORT, TEMPORAL_UI_PORT, log);
    // createStack and every child process read these.
    process.env.DATABASE_URL = postgres.url;
    process.env.REDIS_URL = redis.url;
    process.env.TEMPORAL_ADDRESS = temporal.url;
    stack = await createStack('faults-suite');
    bundleEnv = await sharedBundleEnv();
    relay = await startRelay(stack.simulator.url);
    await setIngestMode(stack.db.pool, 'async', 'faults-suite');
    account = await seedAccount(stack, {
      name: 'faults1',
      qps: QPS,
      typeGroups: { card_status: 'main', carddata: 'main' },
      cards: CARDS,
      intervalsSec: { card_status: 2, carddata: 2 },
      // Short leases: a card whose run died with a fault is claimed again seconds later.
      carrier: { leaseMs: 5000, stepTimeoutMs: STEP_TIMEOUT_MS, totalTimeoutMs: 4000 },
    });
    // Started before the control worker so its keeper reuses this run (short reconcile period:
    // a lost Redis is noticed and a failed scheduler replaced in seconds, not a minute).
    await ensurePollingControl(
      { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX },
      { reconcileEveryMs: 2000 },
    );
    await Promise.all(WORKER_KINDS.map((kind) => startWorker(kind)));
    const pool = stack.db.pool;
    await waitFor(
      'every card polled once',
      async () =>
        Number((await pool.query<{ n: string }>("SELECT count(DISTINCT card_id)::text AS n FROM card_execution WHERE outcome = 'success'")).rows[0]?.n) ===
        CARDS,
      90_000,
    );
    // Async ingest really writes: observations arrive through the ingest worker.
    await waitFor(
      'observations written by the ingest worker',
      async () => Number((await pool.query<{ n: string }>('SELECT count(*)::text AS n FROM card_observation')).rows[0]?.n) > 0,
      30_000,
    );
  });

  after(async () => {
    for (const entry of workers.values()) await killEntry(entry);
    await relay?.close();
    // Services may be down if a test failed half-way: the stack's cleanup needs them.
    await postgres?.start().catch(() => undefined);
    await redis?.start().catch(() => undefined);
    await temporal?.start().catch(() => undefined);
    await stack?.close().catch(() => undefined);
    await temporal?.stop();
    await redis?.stop();
    await postgres?.stop();
    if (rows.length > 0) process.stdout.write(`\n${writeTable(rows)}\n`);
  });

  async function successesSince(since: Date): Promise<number> {
    const { rows: r } = await s().db.pool.query<{ n: string }>("SELECT count(*)::text AS n FROM card_execution WHERE outcome = 'success' AND started_at > $1", [
      since,
    ]);
    return Number(r[0]?.n);
  }

  async function cardsCheckedSince(since: Date): Promise<number> {
    const { rows: r } = await s().db.pool.query<{ n: string }>(
      "SELECT count(DISTINCT card_id)::text AS n FROM card_execution WHERE outcome = 'success' AND started_at > $1",
      [since],
    );
    return Number(r[0]?.n);
  }

  /** Request checks for two cards; while the fault lasts they may be refused, but their durable items must still end or be scheduled. */
  async function requestChecks(cards: readonly number[] = [0, 1]): Promise<string> {
    const results = await Promise.allSettled(
      cards
        .map((i) => cardIds()[i] as string)
        .map((cardId) => s().services.requests.requestCheck(carrierId(), { cardId, types: ['card_status'], actor: 'faults', source: 'faults' })),
    );
    return results.map((r) => (r.status === 'fulfilled' ? r.value.status : 'refused')).join('/');
  }

  async function observationsSince(since: Date): Promise<number> {
    const { rows: r } = await s().db.pool.query<{ n: string }>('SELECT count(*)::text AS n FROM card_observation WHERE inserted_at > $1', [since]);
    return Number(r[0]?.n);
  }

  /** Polling resumed: a card run that started after the fault succeeded, and its observations reached PostgreSQL (async ingest). */
  async function resumed(backAt: Date, what: string): Promise<number> {
    await waitFor(
      `a successful execution that started after ${what}, and new observations`,
      async () => (await successesSince(backAt)) > 0 && (await observationsSince(backAt)) > 0,
      RESUME_MS,
      200,
    );
    return (Date.now() - backAt.getTime()) / 1000;
  }

  /** Card runs holding a lease right now: a kill "mid-run" really interrupts some. */
  const inFlight = async (): Promise<number> => s().deps.redis.zcard(s().deps.store.keys(carrierId()).running);

  /**
   * After a fault ended at `backAt`: polling resumed within a minute, every card polled again, and
   * the invariants hold. Adds the row to the table before asserting, so a failure is in the table too.
   */
  async function checkAfter(t: TestContext, fault: string, backAt: Date, notes: string[] = []): Promise<void> {
    let recoverySec: number | null = null;
    try {
      recoverySec = await resumed(backAt, fault);
    } catch {
      recoverySec = null;
    }
    // Every card polled again (a card whose claim was orphaned by the fault included).
    await waitFor('every card polled after the fault', async () => (await cardsCheckedSince(backAt)) === CARDS, RESUME_MS + 15_000, 500).catch(() => undefined);
    const checked = await cardsCheckedSince(backAt);
    // Items requested around the fault get the time to be served.
    await waitFor(
      'priority items served',
      async () =>
        Number(
          (
            await s().db.pool.query<{ n: string }>(
              "SELECT count(*)::text AS n FROM polling_priority_item WHERE status NOT IN ('completed', 'failed') AND next_run_at IS NULL",
            )
          ).rows[0]?.n,
        ) === 0,
      15_000,
      500,
    ).catch(() => undefined);
    const inv = await readInvariants(s(), carrierId(), cardIds(), GATEWAY_ACCOUNT, QPS);
    const key = (problem: string): string => problem.split(' ')[0] ?? problem;
    const newSim = [...inv.concurrentCards, ...inv.budgetProblems].filter((p) => !seenSimProblems.has(key(p)));
    for (const p of newSim) seenSimProblems.add(key(p));
    const lost = CARDS - checked + inv.laneProblems.length;
    rows.push({
      fault,
      recoverySec,
      cardsChecked: checked,
      cards: CARDS,
      lost,
      duplicates: inv.duplicates,
      notes: [...notes, ...newSim, ...inv.strandedItems.slice(0, 2)].join('; '),
    });
    phase(
      t,
      `${fault}: recovery ${recoverySec === null ? 'none' : `${recoverySec.toFixed(1)} s`}, cards checked after ` +
        `${checked}/${CARDS}, lanes ${inv.laneProblems.length === 0 ? 'ok' : inv.laneProblems.join(', ')}, duplicates ` +
        `${inv.duplicates}`,
    );
    assert.notEqual(recoverySec, null, `polling did not resume within ${RESUME_MS / 1000} s after: ${fault}`);
    assert.equal(checked, CARDS, `only ${checked} of ${CARDS} cards were polled again after: ${fault}`);
    assert.deepEqual(inv.laneProblems, [], 'cards not in exactly one lane or running');
    assert.deepEqual(inv.duplicateSamples, [], 'duplicate observations');
    assert.deepEqual(newSim, [], 'the simulator saw a card executed twice at once or a window over budget');
    assert.deepEqual(inv.strandedItems, [], 'priority items neither terminal nor with a next run');
  }

  for (const kind of WORKER_KINDS) {
    test(`kill -9 of the ${kind} worker mid-run, started again`, async (t) => {
      const entry = workers.get(kind) as EntryProcess;
      assert.ok(isRunning(entry), `the ${kind} worker was not running before the fault`);
      await requestChecks();
      // Mid-run: some card run holds a lease when the process dies.
      await waitFor('a card run in flight', async () => (await inFlight()) > 0, 15_000, 10);
      const running = await inFlight();
      await killEntry(entry);
      phase(t, `${kind} worker killed with ${running} card runs in flight`);
      await sleep(2000);
      await startWorker(kind);
      const backAt = new Date();
      phase(t, `${kind} worker started again`);
      await requestChecks();
      await checkAfter(t, `kill -9 ${kind} worker`, backAt, [`${running} runs in flight at the kill`]);
    });
  }

  test('simulator unreachable for 30 s', async (t) => {
    const r = relay as Relay;
    await r.cut();
    phase(t, 'gateway unreachable');
    await requestChecks();
    await sleep(30_000);
    await r.restore();
    const backAt = new Date();
    phase(t, 'gateway reachable again');
    await checkAfter(t, 'simulator unreachable 30 s', backAt);
  });

  test('a gateway slower than the step timeout for 20 s: steps fail or defer, nothing hangs, polling continues', async (t) => {
    const simulator = s().simulator;
    const since = new Date();
    await simulator.updateAccount(GATEWAY_ACCOUNT, { latencyMs: { p50: STEP_TIMEOUT_MS * 2, p99: STEP_TIMEOUT_MS * 3 } });
    phase(t, `gateway latency above the ${STEP_TIMEOUT_MS} ms step timeout`);
    await requestChecks();
    await sleep(20_000);
    await simulator.updateAccount(GATEWAY_ACCOUNT, { latencyMs: { p50: 5, p99: 20 } });
    const backAt = new Date();
    const { rows: outcomes } = await s().db.pool.query<{ outcome: string; n: string }>(
      'SELECT outcome, count(*)::text AS n FROM card_execution WHERE started_at > $1 AND started_at < $2 GROUP BY outcome',
      [since, backAt],
    );
    const byOutcome = outcomes.map((o) => `${o.outcome} ${o.n}`).join(', ');
    phase(t, `executions during the slow phase: ${byOutcome}`);
    // The slow phase produced finished executions that were not successes: the step timeout cut them.
    const notSuccess = outcomes.filter((o) => o.outcome !== 'success').reduce((sum, o) => sum + Number(o.n), 0);
    assert.ok(notSuccess > 0, `no execution ended with a step failure or deferral while the gateway was slow (${byOutcome})`);
    await checkAfter(t, 'gateway slower than step timeout 20 s', backAt, [`during: ${byOutcome}`]);
    // Nothing hangs: no card run that started in the slow phase is still running.
    const query =
      `WorkflowType = "cardCheck" AND WorkflowId STARTS_WITH "${s().config.WORKFLOW_ID_PREFIX}" AND ExecutionStatus ` +
      `= "Running" AND StartTime < "${backAt.toISOString()}"`;
    let hanging = 0;
    for await (const run of s().client.workflow.list({ query })) if (run) hanging += 1;
    assert.equal(hanging, 0, 'card runs from the slow phase still running');
  });

  test('Redis restarted (AOF on)', async (t) => {
    const r = redis as PrivateService;
    await r.stop();
    phase(t, 'Redis stopped');
    // The priority item is written to PostgreSQL first; the Redis request meets the outage.
    // Cards nothing else requests: each gets a fresh item, not one merged into an active item.
    const requested = await requestChecks([6, 7]);
    await sleep(5000);
    await r.start();
    const backAt = new Date();
    phase(t, `Redis started again (request-checks during the outage: ${requested})`);
    await checkAfter(t, 'Redis restart (AOF)', backAt, [`request-checks while down: ${requested}`]);
  });

  test('Redis flushed while running: rebuilt from PostgreSQL', async (t) => {
    const marker = `${s().redis.namespace}poll:meta:rebuilt`;
    await s().deps.redis.flushdb();
    const backAt = new Date();
    phase(t, 'Redis flushed');
    await waitFor('the rebuild marker written again', async () => (await s().deps.redis.exists(marker)) === 1, RESUME_MS, 250).catch(() => undefined);
    const rebuiltSec = (Date.now() - backAt.getTime()) / 1000;
    const rebuilt = (await s().deps.redis.exists(marker)) === 1;
    phase(t, rebuilt ? `rebuilt in ${rebuiltSec.toFixed(1)} s` : 'no rebuild marker within a minute');
    await checkAfter(t, 'Redis FLUSHDB', backAt, [rebuilt ? `rebuilt after ${rebuiltSec.toFixed(1)} s` : 'not rebuilt']);
    assert.ok(rebuilt, 'Redis was not rebuilt from PostgreSQL after the flush');
  });

  test('Temporal dev server killed -9 and started again on the same db file', async (t) => {
    const tp = temporal as PrivateTemporal;
    await tp.kill();
    phase(t, 'Temporal killed');
    await requestChecks();
    await sleep(10_000);
    await tp.start();
    const backAt = new Date();
    phase(t, 'Temporal started again');
    // A supervisor would restart a worker process that exited (its pollers gave up): note it.
    const notes: string[] = [];
    await sleep(5000);
    for (const kind of WORKER_KINDS) {
      const entry = workers.get(kind) as EntryProcess;
      if (isRunning(entry)) continue;
      notes.push(`${kind} worker exited (${String(entry.child.exitCode ?? entry.child.signalCode)}), restarted`);
      await startWorker(kind);
    }
    if (notes.length > 0) phase(t, notes.join('; '));
    await checkAfter(t, 'Temporal kill -9 + restart', backAt, notes);
  });

  test(`PostgreSQL stopped for ${PG_OUTAGE_MS / 1000} s, then started: no card run fails, every finished run gets its records`, async (t) => {
    const pg = postgres as PrivateService;
    const since = new Date();
    await pg.stop();
    phase(t, 'PostgreSQL stopped');
    await sleep(PG_OUTAGE_MS);
    await pg.start();
    const backAt = new Date();
    phase(t, 'PostgreSQL started again');
    await requestChecks();
    const exited = WORKER_KINDS.filter((kind) => !isRunning(workers.get(kind) as EntryProcess));
    await checkAfter(
      t,
      `PostgreSQL down ${PG_OUTAGE_MS / 1000} s`,
      backAt,
      exited.map((kind) => `${kind} worker exited`),
    );
    assert.deepEqual(exited, [], 'worker processes exited during the PostgreSQL outage');
    // Runs that waited for their records through the outage complete once the database is back,
    // none fails or times out, and every one that finished a check has its execution row.
    const cardRuns = `WorkflowType = "cardCheck" AND WorkflowId STARTS_WITH "${s().config.WORKFLOW_ID_PREFIX}" AND StartTime > "${since.toISOString()}"`;
    await waitFor(
      'no card run still running from the outage',
      async () => {
        for await (const run of s().client.workflow.list({ query: `${cardRuns} AND ExecutionStatus = "Running" AND StartTime < "${backAt.toISOString()}"` }))
          return run === undefined;
        return true;
      },
      RESUME_MS,
    );
    const byStatus = new Map<string, number>();
    const finished: string[] = [];
    for await (const run of s().client.workflow.list({ query: cardRuns })) {
      byStatus.set(run.status.name, (byStatus.get(run.status.name) ?? 0) + 1);
      const outcome = run.searchAttributes.Outcome?.[0];
      if (run.status.name === 'COMPLETED' && typeof outcome === 'string' && ['success', 'partial', 'failure', 'deferred'].includes(outcome))
        finished.push(run.runId);
    }
    phase(t, `card runs since the outage began: ${[...byStatus].map(([k, v]) => `${k} ${v}`).join(', ')}; finished with records expected: ${finished.length}`);
    assert.equal(byStatus.get('FAILED') ?? 0, 0, 'card runs failed during the outage');
    assert.equal(byStatus.get('TIMED_OUT') ?? 0, 0, 'card runs timed out during the outage');
    assert.ok(finished.length > 0, 'no card run finished a check across the outage');
    // Asynchronous ingest may still be writing the backlog of the outage.
    const unrecorded = async (): Promise<string[]> => {
      const { rows: recorded } = await s().db.pool.query<{ run_id: string }>('SELECT run_id FROM card_execution WHERE run_id = ANY($1::text[])', [finished]);
      const ids = new Set(recorded.map((r) => r.run_id));
      return finished.filter((id) => !ids.has(id));
    };
    await waitFor('every finished run recorded', async () => (await unrecorded()).length === 0, RESUME_MS).catch(() => undefined);
    const missing = await unrecorded();
    assert.deepEqual(missing, [], 'finished card runs without their execution record');
  });

  test('summary table', (t) => {
    const table = renderTable(rows);
    for (const line of table.split('\n')) t.diagnostic(line);
    writeTable(rows);
    assert.ok(rows.length > 0, 'no fault ran');
  });
});
