/**
 * Several processes per task queue on the cluster setup (docs/design.md, 'Operating it': on a
 * Temporal cluster): the real worker entry points (src/workers/*.ts) as separate processes — 2 card
 * workers, 2 control workers, 1 gateway worker (GATEWAY_STEPS=queue, so gateway calls run there)
 * and 1 ingest worker (async ingest, so the records are written there) — poll 24 cards over 8
 * accounts with short intervals while request-checks arrive. Mid-run one card worker and one
 * control worker are killed with SIGKILL.
 *
 * The single-executor and no-loss guarantees must hold across the processes: every card keeps
 * being checked, no card ever has two gateway calls at once, every request-check is served (sent
 * again after a "try again" answer, as the API's 503 + Retry-After tells a client), no run
 * fails or times out except runs that were on the killed card worker, no lease expires beyond
 * those runs, the carrier rejects nothing — and each process of a queue really took its share.
 */
import './env.js';
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import { storageMaintenanceScheduleId } from '../../src/workflow-safe/workflowIds.js';
import { switchIngestMode } from '../../src/ingest/mode.js';
import { ensurePollingControl, requestCheck, currentSchedulerStatus, type OrchestrationRef } from '../../src/app/temporalControl.js';
import type { RequestCheckResult } from '../../src/workflow-safe/requestCheck.js';
import { isCluster } from '../../src/redis/connection.js';
import { createStack, stackEnv, type Stack } from '../../testkit/orchestration.js';
import { seedAccount, waitFor, type SeedAccount } from '../../testkit/seed.js';
import { sharedBundleEnv } from '../../testkit/workflowBundle.js';
import { isRunning, spawnEntryProcess, waitUntilPrinted, type EntryProcess } from '../faults/entryProcess.js';
import { tryAgain } from '../../src/api/tryAgain.js';

/**
 * 24 cards over 8 accounts: a carrierScheduler runs on one control worker at a time (sticky, its
 * claims are local activities), so the accounts are what the control processes share.
 */
const ACCOUNTS = 8;
const CARDS_PER_ACCOUNT = 3;
/** Successful executions every card must have after the kills. */
const CHECKS_AFTER_KILL = 3;
const REQUEST_EVERY_MS = 700;
const START_LIMIT_MS = 180_000;
/**
 * Bound of the waits for every card's checks: generous, the test asserts what happened, not how
 * fast — with a busy loop per core beside CI (the fault suite running too) the six processes had
 * not checked every card twice within 120 s (ci10).
 */
const RESUME_LIMIT_MS = 300_000;

type Kind = 'card' | 'control' | 'gateway' | 'ingest';

interface WorkerProcess extends EntryProcess {
  readonly kind: Kind;
  /** `/metrics` of the process (WORKER_METRICS_PORT=0: a free port, printed at start). */
  metricsUrl: string;
}

/** Sum of every sample of a metric (all label sets) in a Prometheus text exposition. */
function metricSum(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

async function scrape(worker: WorkerProcess): Promise<string> {
  const response = await fetch(worker.metricsUrl);
  if (!response.ok) throw new Error(`${worker.name}: /metrics answered ${response.status}`);
  return response.text();
}

async function metric(worker: WorkerProcess, name: string): Promise<number> {
  return metricSum(await scrape(worker), name);
}

/** Accounts a control process ran claim rounds for (the schedulers it held). */
async function claimingAccounts(worker: WorkerProcess): Promise<string[]> {
  return [...(await scrape(worker)).matchAll(/^cardpoller_claimed_total\{carrier="([^"]+)"\} (\S+)$/gm)].filter((m) => Number(m[2]) > 0).map((m) => m[1]!);
}

/** What shows that a process of each kind did its queue's work. */
const WORK_METRIC: Readonly<Record<Kind, string>> = {
  card: 'cardpoller_checks_total',
  control: 'cardpoller_claimed_total',
  gateway: 'cardpoller_gateway_latency_seconds_count',
  ingest: 'cardpoller_ingest_records_total',
};

/** The worker identity the TypeScript SDK gives a process' workers by default. */
const identityPrefix = (worker: EntryProcess): string => `${worker.child.pid}@`;

/** Identities of the workers that started this run's workflow tasks. */
async function workflowTaskIdentities(client: Client, workflowId: string, runId: string): Promise<Set<string>> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  const identities = new Set<string>();
  for (const event of history.events ?? []) {
    const identity = event.workflowTaskStartedEventAttributes?.identity ?? event.workflowTaskCompletedEventAttributes?.identity;
    if (identity) identities.add(identity);
  }
  return identities;
}

/** Times an API client sends a request-check the API answered 503 + Retry-After, before it gives up. */
const TRY_AGAIN_ATTEMPTS = 4;

/**
 * A request-check as a client of the API makes it: an answer the API would give as 503 with
 * `Retry-After` (src/api/tryAgain.ts) is waited out and sent again, a few times; any other error,
 * or "try again" past the last attempt, is the result.
 */
async function requestCheckAsTheApiClient(
  ref: OrchestrationRef,
  carrierId: string,
  cardId: string,
  onTryAgain: (error: unknown) => void,
): Promise<RequestCheckResult> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await requestCheck(ref, carrierId, { cardId, types: ['card_status'], actor: 'test', source: 'test' });
    } catch (error) {
      const answer = tryAgain(error);
      if (answer === undefined || attempt === TRY_AGAIN_ATTEMPTS) throw error;
      onTryAgain(error);
      await new Promise((resolve) => setTimeout(resolve, answer.afterSec * 1000));
    }
  }
}

async function killHard(worker: EntryProcess): Promise<void> {
  if (!isRunning(worker)) return;
  worker.child.kill('SIGKILL');
  await worker.exited;
}

test(
  '2 card, 2 control, 1 gateway, 1 ingest worker processes: one card and one control worker killed -9, single ' + 'executor and no loss hold',
  async (t: TestContext) => {
    const began = Date.now();
    const phase = (what: string): void => t.diagnostic(`${((Date.now() - began) / 1000).toFixed(1)} s: ${what}`);
    const stack: Stack = await createStack('cluster-multiprocess');
    const processes: WorkerProcess[] = [];
    let requesting: Promise<void> | undefined;
    let stopRequests = false;
    try {
      assert.ok(isCluster(stack.deps.redis), 'runs on the Redis Cluster');
      // Records go through the ingest stream, written by the ingest process.
      await switchIngestMode(stack.db.pool, 'async', 'test');
      const ref: OrchestrationRef = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
      // Started before the control processes (whose keeper would start it with the defaults), so it
      // reconciles every 2 s.
      await ensurePollingControl(ref, { reconcileEveryMs: 2000 });

      const bundleEnv = await sharedBundleEnv();
      const spawnWorker = (kind: Kind, n: number): WorkerProcess => {
        const entry = spawnEntryProcess(`${kind} worker ${n}`, `src/workers/${kind}.ts`, {
          ...process.env,
          ...stackEnv(stack),
          ...bundleEnv,
          GATEWAY_STEPS: 'queue',
          WORKER_METRICS_PORT: '0',
          WORKER_SHUTDOWN_GRACE_MS: '2000',
          LOG_LEVEL: 'warn',
        });
        const worker: WorkerProcess = Object.assign(entry, { kind, metricsUrl: '' });
        processes.push(worker);
        return worker;
      };
      const cardWorkers = [spawnWorker('card', 1), spawnWorker('card', 2)];
      const controlWorkers = [spawnWorker('control', 1), spawnWorker('control', 2)];
      spawnWorker('gateway', 1);
      spawnWorker('ingest', 1);
      for (const worker of processes) {
        await waitUntilPrinted(worker, 'workers running', START_LIMIT_MS);
        const url = /metrics (http:\/\/[^\s/]+\/metrics)/.exec(worker.output())?.[1];
        assert.ok(url, `${worker.name} printed its metrics URL:\n${worker.output()}`);
        worker.metricsUrl = url;
      }
      phase(`6 worker processes running (pids ${processes.map((w) => `${w.name} ${w.child.pid}`).join(', ')})`);

      // Accounts only now, so their schedulers start (at the next reconcile) with both control
      // workers polling, not all on the first one ready.
      const accounts: SeedAccount[] = [];
      for (let i = 1; i <= ACCOUNTS; i += 1) {
        accounts.push(
          await seedAccount(stack, {
            name: `mp${i}`,
            qps: { main: 40 },
            typeGroups: { card_status: 'main', carddata: 'main' },
            cards: CARDS_PER_ACCOUNT,
            intervalsSec: { card_status: 3, carddata: 6 },
            simulator: { latencyMs: { p50: 100, p99: 300 } },
          }),
        );
      }
      const cards = accounts.flatMap((account) => account.cards.map((card) => ({ ...card, carrierId: account.carrier.id })));

      const successesSince = async (since: Date): Promise<Map<string, number>> => {
        const { rows } = await stack.db.pool.query<{ card_id: string; n: string }>(
          "SELECT card_id::text, count(*)::text AS n FROM card_execution WHERE outcome = 'success' AND started_at > $1 GROUP BY card_id",
          [since],
        );
        return new Map(rows.map((row) => [row.card_id, Number(row.n)]));
      };
      /**
       * What a wait for the cards' checks that ran out saw: per account, its cards' successes and
       * other outcomes, and its scheduler (status query, or why it did not answer); per process,
       * its work and whether it still runs. A CI run once timed out here before any kill (300 s).
       */
      const whereItStands = async (since: Date, times: number): Promise<string> => {
        const { rows } = await stack.db.pool.query<{ card_id: string; outcome: string; n: string }>(
          'SELECT card_id::text, outcome, count(*)::text AS n FROM card_execution WHERE started_at > $1 GROUP BY card_id, outcome',
          [since],
        );
        const lines: string[] = [];
        for (const account of accounts) {
          const cardsOf = account.cards.map((card) => {
            const outcomes = rows.filter((row) => row.card_id === card.id).map((row) => `${row.outcome} ${row.n}`);
            return `${card.id}: ${outcomes.length === 0 ? 'none' : outcomes.join(', ')}`;
          });
          const scheduler = await currentSchedulerStatus(ref, stack.deps.store, account.carrier.id).then(
            (s) =>
              `mode ${s.mode}, rounds ${s.rounds}, running ${s.running}, lanes ${s.lanes.priority}/${s.lanes.normal}, start failures ${s.startFailures}${s.lastFailure ? `, last failure ${JSON.stringify(s.lastFailure)}` : ''}`,
            (error: unknown) => `no answer: ${String(error).slice(0, 200)}`,
          );
          lines.push(`account ${account.carrier.id} (${scheduler}): ${cardsOf.join('; ')}`);
        }
        const work = await Promise.all(
          processes.map(async (w) =>
            isRunning(w) ? `${w.name} ${WORK_METRIC[w.kind]} ${await metric(w, WORK_METRIC[w.kind]).catch((e: unknown) => String(e))}` : `${w.name} exited`,
          ),
        );
        // The last warnings and errors each process logged (LOG_LEVEL=warn: nothing else is printed).
        const logged = processes.map((w) => {
          const lines = w.output().match(/"level":(40|50|60)[^\n]*/g) ?? [];
          return `${w.name}: ${lines.length} warning/error line(s)${
            lines.length === 0
              ? ''
              : `, last: ${lines
                  .slice(-2)
                  .map((line) => line.slice(0, 300))
                  .join(' | ')}`
          }`;
        });
        return [`cards needing ${times} successes:`, ...lines, `processes: ${work.join(', ')}`, ...logged].join('\n');
      };
      const everyCardChecked = async (since: Date, times: number): Promise<Map<string, number> | undefined> => {
        const done = await successesSince(since);
        return cards.every((card) => (done.get(card.id) ?? 0) >= times) ? done : undefined;
      };
      // Before the kills, every process of every queue takes its share.
      const seeded = Date.now();
      await waitFor('every card checked once', () => everyCardChecked(new Date(0), 1), RESUME_LIMIT_MS, 500).catch(async (error: unknown) => {
        throw new Error(`${String(error)}\n${await whereItStands(new Date(0), 1)}`);
      });
      phase(`every card checked once, ${((Date.now() - seeded) / 1000).toFixed(1)} s after the accounts were created`);
      await waitFor('every card checked twice', () => everyCardChecked(new Date(0), 2), RESUME_LIMIT_MS, 500).catch(async (error: unknown) => {
        throw new Error(`${String(error)}\n${await whereItStands(new Date(0), 2)}`);
      });
      phase(`every card checked twice, ${((Date.now() - seeded) / 1000).toFixed(1)} s after the accounts were created`);
      // Request-checks from now on, across the kills: each must end in a priority execution of its card.
      const requests: { cardId: string; at: Date; status: string; ms: number }[] = [];
      const requestFailures: string[] = [];
      // Answers the API gives as 503 + Retry-After (the scheduler not taking updates for longer than
      // the client's own retries: its workflow task timing out again and again on a starved machine
      // while the survivor replays the killed worker's schedulers). Reported, and sent again.
      const tryAgainAnswers: string[] = [];
      // Each request on its own: one addressed to a scheduler of the killed control worker waits
      // until the survivor takes that scheduler over, and must not hold the others back.
      const pending: Promise<void>[] = [];
      requesting = (async () => {
        for (let i = 0; !stopRequests; i += 1) {
          const card = cards[(i * 7) % cards.length]!;
          const at = new Date();
          pending.push(
            requestCheckAsTheApiClient(
              ref,
              card.carrierId,
              card.id,
              (error) => void tryAgainAnswers.push(`card ${card.id} at ${new Date().toISOString()}: ${String(error)}`),
            ).then(
              (result) => void requests.push({ cardId: card.id, at, status: result.status, ms: Date.now() - at.getTime() }),
              (error: unknown) => void requestFailures.push(`card ${card.id} at ${at.toISOString()}: ${String(error)}`),
            ),
          );
          await new Promise((resolve) => setTimeout(resolve, REQUEST_EVERY_MS));
        }
        await Promise.all(pending);
      })();

      const work = async (): Promise<Map<WorkerProcess, number>> =>
        new Map(await Promise.all(processes.filter(isRunning).map(async (w) => [w, await metric(w, WORK_METRIC[w.kind])] as const)));
      const shared = await waitFor(
        'work done by each of the six processes',
        async () => {
          const done = await work();
          return [...done.values()].every((n) => n > 0) ? done : undefined;
        },
        60_000,
        500,
      ).catch(async (error: unknown) => {
        throw new Error(`${String(error)}: ${[...(await work())].map(([w, n]) => `${w.name} ${WORK_METRIC[w.kind]} ${n}`).join(', ')}`);
      });
      phase(`work before the kills: ${[...shared].map(([w, n]) => `${w.name} ${n}`).join(', ')}`);
      for (const worker of controlWorkers) phase(`${worker.name} claimed for accounts ${(await claimingAccounts(worker)).join(', ')}`);

      // Kill the control worker with the most claim rounds (it holds schedulers), and a card worker
      // at a moment it holds open card runs (their workflow tasks started there).
      const [controlVictim] = [...controlWorkers].sort((a, b) => (shared.get(b) ?? 0) - (shared.get(a) ?? 0));
      assert.ok(controlVictim);
      const cardRuns = `WorkflowType = "cardCheck" AND WorkflowId STARTS_WITH "${stack.config.WORKFLOW_ID_PREFIX}card-"`;
      // Work counts are read before the search: the kill follows the find at once, since a card
      // run lasts a few hundred ms and one found open is soon closed (CI saw the kill interrupt none).
      const before = await work();
      let killedAt = new Date();
      const cardVictim = await waitFor(
        'a card worker holding an open card run',
        async () => {
          for await (const run of stack.client.workflow.list({ query: `${cardRuns} AND ExecutionStatus = "Running"` })) {
            const identities = [...(await workflowTaskIdentities(stack.client, run.workflowId, run.runId))];
            const holder = cardWorkers.find((worker) => identities.some((id) => id.startsWith(identityPrefix(worker))));
            // Visibility lags the run's state: the run may have closed already; its description does not lag.
            if (holder && (await stack.client.workflow.getHandle(run.workflowId, run.runId).describe()).status.name === 'RUNNING') {
              killedAt = new Date();
              await Promise.all([killHard(holder), killHard(controlVictim)]);
              return holder;
            }
          }
          return undefined;
        },
        30_000,
        100,
      );
      const survivors = processes.filter((w) => w !== controlVictim && w !== cardVictim);
      phase(`killed ${cardVictim.name} (pid ${cardVictim.child.pid}) and ${controlVictim.name} (pid ${controlVictim.child.pid})`);

      // Every card keeps being checked, by the surviving processes.
      await waitFor(
        `${CHECKS_AFTER_KILL} successful executions of every card after the kills`,
        () => everyCardChecked(killedAt, CHECKS_AFTER_KILL),
        RESUME_LIMIT_MS,
        500,
      );
      phase(`every card succeeded ${CHECKS_AFTER_KILL} times after the kills`);
      const after = await work();
      for (const worker of survivors) {
        assert.ok(
          (after.get(worker) ?? 0) > (before.get(worker) ?? 0),
          `${worker.name} did no work after the kills (${WORK_METRIC[worker.kind]} ${before.get(worker)} → ${after.get(worker)})`,
        );
      }
      phase(`work after the kills: ${survivors.map((w) => `${w.name} ${before.get(w)} → ${after.get(w)}`).join(', ')}`);

      stopRequests = true;
      await requesting;
      requesting = undefined;
      assert.deepEqual(requestFailures, [], 'request-checks refused or failed');
      phase(`request-checks answered "try again" and sent again: ${tryAgainAnswers.length === 0 ? 'none' : tryAgainAnswers.join('; ')}`);
      const requested = requests.filter((r) => r.status === 'requested');
      assert.ok(requested.length >= 20, `only ${requested.length} request-checks accepted (${requests.length} sent)`);
      // Served: a priority execution of the card finished after the request, and no item is left open.
      await waitFor(
        'every request-check served by a priority execution',
        async () => {
          for (const request of requested) {
            const { rows } = await stack.db.pool.query(
              'SELECT 1 FROM card_execution WHERE card_id = $1::bigint AND from_priority AND finished_at >= $2 LIMIT 1',
              [request.cardId, request.at],
            );
            if (rows.length === 0) return false;
          }
          const { rows: open } = await stack.db.pool.query("SELECT 1 FROM polling_priority_item WHERE status <> 'completed' LIMIT 1");
          return open.length === 0;
        },
        60_000,
        1000,
      );
      phase(`${requested.length} request-checks (of ${requests.length}) served; slowest answered in ${Math.max(...requests.map((r) => r.ms))} ms`);

      // Runs on the killed card worker: those open at the kill whose workflow tasks it started.
      const killedIdentity = identityPrefix(cardVictim);
      const onKilled = new Set<string>();
      const atKill = killedAt.toISOString();
      for await (const run of stack.client.workflow.list({
        query: `${cardRuns} AND StartTime <= "${atKill}" AND (ExecutionStatus = "Running" OR CloseTime >= "${atKill}")`,
      })) {
        const identities = await workflowTaskIdentities(stack.client, run.workflowId, run.runId);
        if ([...identities].some((id) => id.startsWith(killedIdentity))) onKilled.add(run.runId);
      }
      phase(`${onKilled.size} card run(s) were on the killed card worker at the kill`);
      assert.ok(onKilled.size > 0, 'the kill interrupted card runs');

      // No loss: every claimed card was executed — each card run that ended has its execution record
      // (written by the ingest process), unless it ended with nothing to do (claim no longer ours).
      const NO_RECORD = new Set(['lost', 'not_polled', 'unprepared']);
      let unrecorded: string[] = [];
      let completedRuns = 0;
      let withoutWork = 0;
      await waitFor(
        'an execution record for every completed card run',
        async () => {
          const { rows } = await stack.db.pool.query<{ run_id: string }>('SELECT run_id FROM card_execution');
          const recorded = new Set(rows.map((row) => row.run_id));
          unrecorded = [];
          completedRuns = 0;
          withoutWork = 0;
          for await (const run of stack.client.workflow.list({ query: `${cardRuns} AND ExecutionStatus = "Completed"` })) {
            completedRuns += 1;
            const outcome = run.searchAttributes.Outcome?.[0];
            if (typeof outcome === 'string' && NO_RECORD.has(outcome)) withoutWork += 1;
            else if (!recorded.has(run.runId)) unrecorded.push(`${run.workflowId} ${run.runId} (Outcome ${String(outcome)})`);
          }
          return unrecorded.length === 0;
        },
        30_000,
        1000,
      ).catch((error: unknown) => {
        throw new Error(`${String(error)}; runs without a record: ${unrecorded.slice(0, 10).join(', ')}`);
      });
      phase(`${completedRuns} completed card runs, each with its execution record (${withoutWork} ended without work)`);

      // No run failed or timed out, except runs on the killed card worker.
      const broken: string[] = [];
      for await (const run of stack.client.workflow.list({
        query: `WorkflowId STARTS_WITH "${stack.config.WORKFLOW_ID_PREFIX}" AND ExecutionStatus IN ("Failed", "TimedOut")`,
      })) {
        if (!onKilled.has(run.runId)) broken.push(`${run.workflowId} ${run.runId} ${run.status.name}`);
      }
      assert.deepEqual(broken, [], 'failed or timed-out runs not on the killed card worker');

      // Leases: none expired beyond the runs the killed card worker held (asked while a control
      // worker still answers the schedulers' status query).
      let expired = 0;
      for (const account of accounts) expired += (await currentSchedulerStatus(ref, stack.deps.store, account.carrier.id)).expiredLeases;
      phase(`expired leases: ${expired}`);
      assert.ok(expired <= onKilled.size, `${expired} leases expired, but only ${onKilled.size} runs were on the killed card worker`);

      // Stop the processes gracefully; errors they logged are reported, for the record.
      await Promise.all(
        processes.filter(isRunning).map(async (worker) => {
          worker.child.kill('SIGTERM');
          await worker.exited;
        }),
      );
      for (const worker of survivors) {
        const errors = worker.output().match(/"level":(50|60)[^\n]*/g) ?? [];
        if (errors.length > 0) t.diagnostic(`${worker.name} logged ${errors.length} error line(s), first: ${errors[0]?.slice(0, 300)}`);
      }

      // Single executor and the carrier's limits, per card.
      const stats = await stack.simulator.stats();
      for (const card of cards) {
        const seen = stats.cards?.[card.iccid];
        assert.ok(seen && seen.calls > 0, `simulator never saw card ${card.iccid}`);
        assert.ok(seen.maxConcurrent <= 1, `card ${card.iccid} had ${seen.maxConcurrent} concurrent gateway calls`);
        assert.notEqual(await stack.deps.store.laneOf(card.carrierId, card.id), null, `card ${card.id} fell out of its lane`);
      }
      for (const account of accounts)
        assert.equal(stats.accounts[`${account.carrier.name}-gw`]?.groups.main?.rejected, 0, `account ${account.carrier.name}: calls rejected`);
    } finally {
      stopRequests = true;
      await requesting?.catch(() => undefined);
      for (const worker of processes) await killHard(worker);
      // The control processes created the storage-maintenance schedule: it would outlive the test.
      await stack.client.schedule
        .getHandle(storageMaintenanceScheduleId(stack.config.WORKFLOW_ID_PREFIX))
        .delete()
        .catch(() => undefined);
      await stack.close();
    }
  },
);
