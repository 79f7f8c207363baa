/**
 * Service outages (docs/design.md, 'Failure handling'; README.md, 'Outages'): PostgreSQL, then
 * Redis, is stopped under a running system and started again. Every process must survive (no
 * unhandled 'error' event, no unhandled rejection), report the outage as handled errors, and poll
 * again once the service is back.
 *
 * The system runs against a private PostgreSQL and Redis (test/faults/privateServices.ts), never
 * the shared ones other test files use. This process hosts the control, card and ingest workers
 * and the live line; the gateway worker and the API run as processes of their own from their real
 * entry points (src/workers/gateway.ts, src/api/main.ts), so "still alive" is checked on them too.
 * The long outage (records waiting minutes for the database, no run failing) is the fault suite's
 * (test/faults-suite), so `npm test` does not pay for it twice.
 */
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createStack, stackEnv, type Stack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor } from '../../testkit/seed.js';
import { privatePostgres, privateRedis, type PrivateService } from './privateServices.js';
import { freePort, isRunning, spawnEntryProcess, waitUntilPrinted, type EntryProcess } from './entryProcess.js';
import { ensurePollingControl, currentSchedulerStatus } from '../../src/app/temporalControl.js';
import type { SchedulerStatus } from '../../src/workflow-safe/loopStatus.js';
import { startLiveLine } from '../../demo/liveLine.js';

/**
 * Ports and data folders of this test's own services: not the shared ones (5433, 6379), nor the
 * fault suite's (15433, 16379; test/faults-suite/faults.test.ts), which runs beside this file.
 */
const PG_PORT = 15435;
const REDIS_PORT = 16381;
const CARDS = 6;
const OUTAGE_MS = 10_000;
/** Polling must be back within this after the service returns (scheduler restart backoff included). */
const RESUME_MS = 45_000;

/** Everything that would have killed this process without the test runner's own handlers. */
const crashes: string[] = [];
const describeError = (error: unknown): string => (error instanceof Error ? (error.stack ?? error.message) : String(error));
process.on('uncaughtExceptionMonitor', (error, origin) => void crashes.push(`${origin}: ${describeError(error)}`));
process.on('unhandledRejection', (reason) => void crashes.push(`unhandledRejection: ${describeError(reason)}`));

/** One of the project's entry points as its own process, configured for this stack. */
function spawnEntry(name: string, script: string, stack: Stack, extraEnv: Record<string, string> = {}): EntryProcess {
  // Expected activity failures and request logs would otherwise fill the output.
  return spawnEntryProcess(name, script, { ...process.env, ...stackEnv(stack), LOG_LEVEL: 'error', ...extraEnv });
}

const waitUntilReady = (entry: EntryProcess, line: string): Promise<void> => waitUntilPrinted(entry, line);

/**
 * Lines in which a process reported a Redis connection error event: unhandled (ioredis' own
 * console line), or handled (a JSON log line of src/runtime/connectionErrors.ts).
 */
function redisErrorLines(output: string): string[] {
  return output.split('\n').filter((line) => /\[ioredis\] Unhandled error event|"msg":"redis\([^"]*\): connection error/.test(line));
}

/** A live line with figures (`[live] 12:34:56 name: …`), not an error report. */
const isLiveFigures = (line: string): boolean => /^\[live\] \d\d:\d\d:\d\d /.test(line);

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('faults: a PostgreSQL or Redis outage under a running system', () => {
  let postgres: PrivateService | undefined;
  let redis: PrivateService | undefined;
  let stack: Stack | undefined;
  const entries: EntryProcess[] = [];
  let apiUrl = '';
  let live: { stop(): Promise<void> } | undefined;
  const liveLines: string[] = [];
  const began = Date.now();
  const phase = (t: TestContext, what: string): void => t.diagnostic(`${((Date.now() - began) / 1000).toFixed(1)} s: ${what}`);

  before(async () => {
    const log = (): void => undefined;
    postgres = await privatePostgres(PG_PORT, log, 'outage-postgres');
    redis = await privateRedis(REDIS_PORT, log, 'outage-redis');
    // Everything below (test schema, Redis namespace, workers, child processes) reads these.
    process.env.DATABASE_URL = postgres.url;
    process.env.REDIS_URL = redis.url;
    stack = await createStack('faults-outage');
    await seedAccount(stack, {
      name: 'outage1',
      qps: { main: 30 },
      typeGroups: { card_status: 'main', carddata: 'main' },
      cards: CARDS,
      intervalsSec: { card_status: 1, carddata: 1 },
      // Short leases: a card whose run died in the outage is claimed again seconds after.
      carrier: { leaseMs: 5000, stepTimeoutMs: 1500, totalTimeoutMs: 4000 },
    });
    const apiPort = await freePort();
    apiUrl = `http://127.0.0.1:${apiPort}`;
    const gateway = spawnEntry('gateway worker', 'src/workers/gateway.ts', stack);
    const api = spawnEntry('API', 'src/api/main.ts', stack, { API_HOST: '127.0.0.1', API_PORT: String(apiPort) });
    entries.push(gateway, api);
    await stack.startWorkers(['control', 'card', 'ingest']);
    await waitUntilReady(gateway, 'workers running');
    await waitUntilReady(api, 'card-poller API on');
    const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    // As `npm start` wires it: a scheduler that does not answer shows as "?".
    const { store } = stack.deps;
    const scheduler = (carrierId: string): Promise<SchedulerStatus | undefined> => currentSchedulerStatus(ref, store, carrierId).catch(() => undefined);
    live = startLiveLine({ pool: stack.deps.pool, store: stack.deps.store, simulator: stack.simulator, scheduler, log: (line) => void liveLines.push(line) });
    // A failed scheduler (its claim activity ran out of retries in the outage) is started again
    // at the next reconcile: keep that short so the test waits seconds, not a minute.
    await ensurePollingControl(ref, { reconcileEveryMs: 2000 });
    const db = stack.db;
    await waitFor(
      'every card polled once',
      async () => Number((await db.pool.query<{ n: string }>('SELECT count(DISTINCT card_id)::text AS n FROM card_execution')).rows[0]?.n) === CARDS,
      40_000,
    );
  });

  after(async () => {
    await live?.stop();
    for (const entry of entries) {
      if (!isRunning(entry)) continue;
      entry.child.kill('SIGKILL');
      await entry.exited;
    }
    // The services may be down if a test failed half-way: the stack's cleanup needs them.
    await postgres?.start();
    await redis?.start();
    await stack?.close();
    await redis?.stop();
    await postgres?.stop();
  });

  async function health(): Promise<{ status: number; failed: string[] }> {
    const response = await fetch(`${apiUrl}/readyz`);
    const body = (await response.json()) as { failed?: string[] };
    return { status: response.status, failed: body.failed ?? [] };
  }

  /** Successful executions that started after `since`: polling is running again. */
  async function successesSince(since: Date): Promise<number> {
    const { rows } = await (stack as Stack).db.pool.query<{ n: string }>(
      "SELECT count(*)::text AS n FROM card_execution WHERE outcome = 'success' AND started_at > $1",
      [since],
    );
    return Number(rows[0]?.n);
  }

  /** carrierScheduler runs of this stack by status, e.g. `FAILED 1, RUNNING 1` (for the record). */
  async function schedulerRuns(): Promise<string> {
    const counts = new Map<string, number>();
    const query = `WorkflowType = "carrierScheduler" AND WorkflowId STARTS_WITH "${(stack as Stack).config.WORKFLOW_ID_PREFIX}"`;
    for await (const run of (stack as Stack).client.workflow.list({ query })) counts.set(run.status.name, (counts.get(run.status.name) ?? 0) + 1);
    return [...counts].map(([status, n]) => `${status} ${n}`).join(', ');
  }

  /** Every process still runs, and nothing went unhandled in this one since `crashesBefore`. */
  function assertSurvived(what: string, crashesBefore: number): void {
    const problems = [
      ...crashes.slice(crashesBefore).map((crash) => `test process: ${crash}`),
      ...entries
        .filter((entry) => !isRunning(entry))
        .map((entry) => `${entry.name} process exited (${String(entry.child.exitCode ?? entry.child.signalCode)}):\n${entry.output().slice(0, 2500)}`),
    ];
    assert.deepEqual(problems, [], `a process did not survive the ${what} outage`);
  }

  /** Both services up, whatever an earlier test left behind (each test stops one of them). */
  async function bothServicesUp(): Promise<void> {
    await postgres?.start();
    await redis?.start();
  }

  test('PostgreSQL stopped (fast shutdown) for 10 s: every process survives, polling resumes when it is back', async (t) => {
    await bothServicesUp();
    const pg = postgres as PrivateService;
    // The API process now holds an idle pooled connection: the one the shutdown terminates.
    assert.equal((await health()).status, 200);
    const liveBefore = liveLines.length;
    const crashesBefore = crashes.length;
    await pg.stop();
    phase(t, 'PostgreSQL stopped');
    await sleep(OUTAGE_MS);
    assertSurvived('PostgreSQL', crashesBefore);
    // Queries fail with an error the caller handles: the API answers, naming the dependency.
    const down = await health();
    assert.equal(down.status, 503);
    assert.deepEqual(down.failed, ['postgres']);
    await pg.start();
    const backAt = new Date();
    const liveBack = liveLines.length;
    phase(t, 'PostgreSQL started again');
    await waitFor('a successful execution that started after PostgreSQL came back', async () => (await successesSince(backAt)) > 0, RESUME_MS);
    phase(t, `polling resumed; carrierScheduler runs: ${await schedulerRuns()}`);
    assert.equal((await health()).status, 200);
    // The live line reported the outage as an error line and prints its figures again after it.
    const during = liveLines.slice(liveBefore, liveBack);
    assert.ok(
      during.some((line) => !isLiveFigures(line)),
      `the live line printed no error during the outage:\n${during.join('\n')}`,
    );
    await waitFor('the live line to print its figures again', async () => liveLines.slice(liveBack).some(isLiveFigures), 12_000);
    assertSurvived('PostgreSQL', crashesBefore);
  });

  test('Redis stopped for 10 s: every process survives, logs the outage without flooding, polling resumes when it is back', async (t) => {
    await bothServicesUp();
    const r = redis as PrivateService;
    const outputBefore = entries.map((entry) => entry.output().length);
    const crashesBefore = crashes.length;
    await r.stop();
    phase(t, 'Redis stopped');
    await sleep(OUTAGE_MS);
    assertSurvived('Redis', crashesBefore);
    const down = await health();
    assert.equal(down.status, 503);
    assert.deepEqual(down.failed, ['redis']);
    await r.start();
    const backAt = new Date();
    phase(t, 'Redis started again');
    await waitFor('a successful execution that started after Redis came back', async () => (await successesSince(backAt)) > 0, RESUME_MS);
    phase(t, `polling resumed; carrierScheduler runs: ${await schedulerRuns()}`);
    assert.equal((await health()).status, 200);
    assertSurvived('Redis', crashesBefore);
    // ioredis reconnects every ≤ 2 s and reports each failed attempt: a line each would flood the
    // log of a long outage. Each process reports it, in a few lines at most.
    entries.forEach((entry, i) => {
      const output = entry.output().slice(outputBefore[i]);
      const reported = redisErrorLines(output);
      phase(t, `${entry.name} logged ${reported.length} Redis connection error line(s)`);
      assert.ok(reported.length >= 1, `the ${entry.name} process did not log the Redis outage:\n${output.slice(-3000)}`);
      assert.ok(
        reported.length <= 3,
        `the ${entry.name} process logged ${reported.length} Redis error lines in a ${OUTAGE_MS / 1000} s outage:\n${reported.join('\n')}`,
      );
    });
  });
});
