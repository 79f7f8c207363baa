/**
 * Records the histories the replay test (test/replay/replay.test.ts) runs the workflow code
 * against: one file per path a workflow takes (test/replay/paths.ts names them and says what makes
 * a history one of them), each provoked here on test stacks on the running services
 * (`npx tsx scripts/services.ts up --test`), each stack on task queues of its own:
 *
 * - `loops` (CARD_RUN_SHAPE=card, SCHEDULER_LOOP=workflow, short histories so runs roll over within seconds): pollingControl
 *   reconciling to its continue-as-new, and switching mode (update and signal); a scheduler run
 *   draining its children at continue-as-new; request-checks (update and signal) served from the
 *   priority lane; a request-check signal the activity rejects for good (the workers' request
 *   service made to refuse that card); a failure streak (the claim fails round after round: Redis
 *   made to fail in the workers' store); a request-check signal whose activity keeps failing
 *   (PostgreSQL made to fail in the workers' request service) carried over continue-as-new, and the
 *   run that applies it; completed cardCheck runs of both lanes. And, on a stack of its own with
 *   a scheduler started here (one signal at a time), request-check signals handled in batches.
 * - `claimLoops` (SCHEDULER_LOOP=activity, card shape, short histories): a scheduler run whose
 *   claim loop laps (each lap superseded here by a newer owner of the account) to its
 *   continue-as-new; one whose lap fails (the workers' store refusing the lap's first write) and is
 *   handed over again by the round loop; one reached by a requestCheck update and signal and a
 *   priorityRequested update while its lap runs.
 * - `cards` (no scheduler, claims made here): a cardCheck whose lease another claim takes during
 *   its first step, one whose steps the carrier rate-limits (deferred), and two whose finish fails
 *   more than 20 times (the workers' store made to fail it, retry intervals shortened by
 *   configuration): one until it lands, one past the lasting bound (lease_lost).
 * - `batch` (CARD_RUN_SHAPE=batch): a cardBatch of several cards, one refused by the carrier; and
 *   one whose finish flush fails more than 20 times before it lands.
 *
 * Histories of earlier releases (`earlier-*.json`) are never re-recorded: they are what runs of
 * those releases hold. Run again (`npx tsx scripts/recordHistories.ts [card|loops|claimLoops|cards|batch]…`;
 * `card` is `loops`, `claimLoops` and `cards`) after a deliberate, versioned workflow change, so the histories
 * describe what the current code records; with no argument, everything.
 */
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { HISTORIES_DIR, saveRecordedHistory } from '../test/replay/recorded.js';
import { HistoryView, REPLAY_PATHS } from '../test/replay/paths.js';
import { createStack, type Stack } from '../testkit/orchestration.js';
import { startStackWorkers } from '../testkit/isolatedStack.js';
import { seedAccount, waitFor } from '../testkit/seed.js';
import { listAudit } from '../testkit/dbReads.js';
import { DomainError } from '../src/domain/errors.js';
import type { FinishInput } from '../src/redis/carrierQueueStore.js';
import { ensurePollingControl, requestCheck, setMode, wakeScheduler } from '../src/app/temporalControl.js';
import { CARD_ID_ATTRIBUTE, CARRIER_ID_ATTRIBUTE } from '../src/workflow-safe/searchAttributes.js';
import { cardWorkflowId, pollingControlWorkflowId, schedulerWorkflowId } from '../src/workflow-safe/workflowIds.js';
import { WORKER_KINDS } from '../src/workers/createWorker.js';
import { requestCheckSignal, schedulerStatusQuery, setModeSignal } from '../src/workflows/messages.js';
import type { CarrierSchedulerArgs } from '../src/workflows/carrierScheduler.js';
import type { CardCheckArgs } from '../src/workflows/cardCheck.js';
import type { CardBatchArgs } from '../src/workflows/cardBatch.js';

/** Small enough to roll over within seconds, large enough for several claim rounds. */
const SCHEDULER_MAX_HISTORY_EVENTS = 150;
const CONTROL_MAX_HISTORY_EVENTS = 120;
/**
 * A finish's retry intervals shortened (the short policy's 20 attempts take about a second, each
 * lasting wait 10 ms doubling to 50 ms, the lasting bound 4 s), so an outage longer than the short
 * policy takes seconds; only a failing finish reads them.
 */
const FINISH_RETRY_CONFIG = { CARD_FINISH_RETRY_INITIAL_MS: 10, CARD_FINISH_RETRY_MAX_INTERVAL_MS: 50, CARD_FINISH_RETRY_TIMEOUT_MS: 4000 };
/** Finish failures of the card whose finish lands: past the short policy's 20 and two more lasting attempts. */
const FINISH_FAILURES = 50;

/**
 * Waits for a closed run among those `query` lists whose history is the path, and saves it as
 * `<path>.json`. Closed runs do not change: each is read once.
 */
async function recordPath(client: Client, path: string, query: string, timeoutMs = 90_000): Promise<{ workflowId: string; runId: string }> {
  const spec = REPLAY_PATHS[path];
  if (!spec) throw new Error(`unknown path ${path}`);
  const seen = new Set<string>();
  const misses: string[] = [];
  const found = await waitFor(
    `a run of path ${path} (${query})`,
    async () => {
      for await (const execution of client.workflow.list({ query: `WorkflowType = "${spec.workflowType}" AND ExecutionStatus != "Running" AND ${query}` })) {
        if (seen.has(execution.runId)) continue;
        seen.add(execution.runId);
        const history = await client.workflow.getHandle(execution.workflowId, execution.runId).fetchHistory();
        const problems = spec.check(new HistoryView(history));
        if (problems.length > 0) {
          misses.push(`${execution.runId}: ${problems.join('; ')}`);
          continue;
        }
        return { workflowId: execution.workflowId, runId: execution.runId, history };
      }
      return undefined;
    },
    timeoutMs,
    500,
  ).catch((error: unknown) => {
    throw new Error(`${String(error)}\nruns seen, and what they lacked:\n${misses.join('\n')}`);
  });
  const file = join(HISTORIES_DIR, `${path}.json`);
  const saved = saveRecordedHistory(
    file,
    { path, description: spec.description, workflowType: spec.workflowType, workflowId: found.workflowId, runId: found.runId },
    found.history,
  );
  process.stdout.write(`${path}: ${saved.events.length} events → ${file}\n`);
  return found;
}

/** `target` whose `method` rejects with `error` while `failing()`: an outage inside the workers only. */
function withFault<T extends object>(target: T, method: keyof T, failing: () => boolean, error: string): T {
  return new Proxy(target, {
    get(object, property) {
      if (property === method && failing()) return () => Promise.reject(new Error(error));
      const value: unknown = Reflect.get(object, property, object);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(object) : value;
    },
  });
}

/**
 * The store's finish fails while `failures(cardId)` is above the attempts made for the card so far
 * (Infinity: Redis never back): an outage of Redis for the finish only, inside the workers.
 */
function failFinishes(stack: Stack, failures: (cardId: string) => number): void {
  const attempts = new Map<string, number>();
  const { store } = stack.deps;
  const real = store.finishWithRun.bind(store);
  store.finishWithRun = (input: FinishInput, run: string) => {
    const attempt = (attempts.get(input.cardId) ?? 0) + 1;
    attempts.set(input.cardId, attempt);
    return attempt <= failures(input.cardId) ? Promise.reject(new Error('Redis unavailable (finish; injected by recordHistories)')) : real(input, run);
  };
}

/** pollingControl, carrierScheduler and cardCheck paths: one stack in the card shape, faults switchable. */
async function recordLoops(): Promise<void> {
  // The workflow loop's paths: the activity loop (the default) records its own in recordClaimLoops.
  const stack = await createStack('record-loops', { config: { SCHEDULER_LOOP: 'workflow' } });
  const faults: { claim: boolean; requests: boolean; rejectedCardId?: string } = { claim: false, requests: false };
  const deps = { ...stack.deps, store: withFault(stack.deps.store, 'claim', () => faults.claim, 'Redis unavailable (injected by recordHistories)') };
  const available = withFault(stack.services.requests, 'requestCheck', () => faults.requests, 'PostgreSQL unavailable (injected by recordHistories)');
  const services = {
    ...stack.services,
    requests: {
      // The service refusing one card's request for good, as it refuses bad data (a DomainError).
      requestCheck: (carrierId: string, request: Parameters<typeof available.requestCheck>[1]) =>
        request.cardId === faults.rejectedCardId
          ? Promise.reject(DomainError.invalid('cardId', `card ${request.cardId} refused (injected by recordHistories)`))
          : available.requestCheck(carrierId, request),
    },
  };
  const started = await startStackWorkers({ config: stack.config, deps, services, taskQueues: stack.taskQueues }, WORKER_KINDS);
  try {
    const account = await seedAccount(stack, {
      name: 'rec1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main', carddata: 'main' },
      cards: 4,
      intervalsSec: { card_status: 2, carddata: 4 },
    });
    const [first, second, third, fourth] = account.cards;
    if (!first || !second || !third || !fourth) throw new Error('seeded fewer cards than asked');
    const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    const prefix = ref.workflowIdPrefix;
    await ensurePollingControl(ref, {
      reconcileEveryMs: 2000,
      maxHistoryEvents: CONTROL_MAX_HISTORY_EVENTS,
      scheduler: { maxHistoryEvents: SCHEDULER_MAX_HISTORY_EVENTS },
    });
    const schedulerId = schedulerWorkflowId(account.carrier.id, prefix);
    const scheduler = `WorkflowId = "${schedulerId}"`;
    const control = `WorkflowId = "${pollingControlWorkflowId(prefix)}"`;
    const cards = `WorkflowId STARTS_WITH "${prefix}card-"`;

    await recordPath(stack.client, 'carrierScheduler-drain', scheduler);
    await recordPath(stack.client, 'cardCheck', cards);
    await recordPath(stack.client, 'pollingControl-reconcile', control);

    // Request-checks: one through the update (the client retries it against the next run when it
    // meets a rollover), one through the signal, sent together so one run holds both.
    const request = (cardId: string) => ({ cardId, types: ['card_status' as const], lane: 'priority' as const, cooldownMs: 0, actor: 'recordHistories' });
    await requestCheck(ref, account.carrier.id, request(first.id));
    await stack.client.workflow.getHandle(schedulerId).signal(requestCheckSignal, request(second.id));
    await recordPath(stack.client, 'carrierScheduler-request-check', scheduler);
    await recordPath(stack.client, 'cardCheck-priority', cards);

    // A request-check signal the activity rejects for good: audited on its card, dropped by the run.
    faults.rejectedCardId = fourth.id;
    await stack.client.workflow.getHandle(schedulerId).signal(requestCheckSignal, request(fourth.id));
    await recordPath(stack.client, 'carrierScheduler-request-check-rejected', scheduler);
    const audit = await listAudit(stack.db.pool, 'iot_card', fourth.id);
    if (!audit.some((row) => row.action === 'request_check_dropped')) throw new Error(`the rejected signal was not audited: ${JSON.stringify(audit)}`);
    faults.rejectedCardId = undefined;

    // A failure streak: the claim fails until one run has backed off twice (a failed round takes
    // its local retries, about 3 s, then waits 2 s, then 4 s). Counted in the run that answers the
    // query: a streak cut by a rollover starts again from one in the next run.
    faults.claim = true;
    await waitFor(
      'two failed claim rounds in a row in one run',
      async () => {
        // (A query meeting the run as it continues as new is asked again.)
        const status = await stack.client.workflow
          .getHandle(schedulerId)
          .query(schedulerStatusQuery)
          .catch(() => undefined);
        return status?.lastFailure?.activity === 'claimRound' && status.lastFailure.consecutive >= 2;
      },
      60_000,
      200,
    );
    faults.claim = false;
    await recordPath(stack.client, 'carrierScheduler-failure-streak', scheduler);

    // A request-check signal whose activity fails until the run has continued as new with it.
    faults.requests = true;
    await stack.client.workflow.getHandle(schedulerId).signal(requestCheckSignal, request(third.id));
    await recordPath(stack.client, 'carrierScheduler-continue-with-pending-requests', scheduler, 120_000);
    faults.requests = false;
    await recordPath(stack.client, 'carrierScheduler-start-with-pending-requests', scheduler);

    // Mode switches: to legacy by update, back to carrier by signal.
    await setMode(ref, 'legacy');
    await stack.client.workflow.getHandle(pollingControlWorkflowId(prefix)).signal(setModeSignal, 'carrier');
    await recordPath(stack.client, 'pollingControl-mode-switch', control);
  } finally {
    for (const worker of started.workers) if (worker.getState() === 'RUNNING') worker.shutdown();
    await stack.close();
    await Promise.allSettled(started.runs);
    await started.connection.close();
  }
}

/** Small: a claim loop's run records ~6 events a lap, so it rolls over after a few laps. */
const CLAIM_LOOP_MAX_HISTORY_EVENTS = 60;
/** How often the script takes the account's claiming from the lap under way (a lap sees it at its next tick). */
const SUPERSEDE_EVERY_MS = 2000;

/**
 * SCHEDULER_LOOP=activity paths. A lap lasts 10 minutes; here each is ended sooner by a newer owner
 * of the account's `loop` key (what a lap of a newer generation writes), so a run laps and rolls
 * over within seconds. One lap fails: the workers' store refuses its first write (Redis away).
 */
async function recordClaimLoops(): Promise<void> {
  const stack = await createStack('record-claim-loops', { config: { SCHEDULER_LOOP: 'activity' } });
  const faults = { loopStarts: 0 };
  const failLoopStart = (): boolean => {
    if (faults.loopStarts === 0) return false;
    faults.loopStarts -= 1;
    return true;
  };
  const deps = {
    ...stack.deps,
    store: withFault(stack.deps.store, 'ownClaimLoop', failLoopStart, 'Redis unavailable (lap start; injected by recordHistories)'),
  };
  const started = await startStackWorkers({ config: stack.config, deps, services: stack.services, taskQueues: stack.taskQueues }, WORKER_KINDS);
  let carrierId = '';
  let superseding = true;
  let stopped = false;
  let supersedes = 0;
  const superseder = (async () => {
    while (!stopped) {
      await new Promise((resolve) => setTimeout(resolve, SUPERSEDE_EVERY_MS));
      if (superseding && !stopped && carrierId !== '') await stack.deps.store.ownClaimLoop(carrierId, `recordHistories~${(supersedes += 1)}`);
    }
  })();
  try {
    const account = await seedAccount(stack, {
      name: 'loop1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main' },
      cards: 3,
      intervalsSec: { card_status: 2 },
    });
    carrierId = account.carrier.id;
    const [first, second] = account.cards;
    if (!first || !second) throw new Error('seeded fewer cards than asked');
    const ref = { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX };
    await ensurePollingControl(ref, { reconcileEveryMs: 5000, scheduler: { maxHistoryEvents: CLAIM_LOOP_MAX_HISTORY_EVENTS } });
    const schedulerId = schedulerWorkflowId(carrierId, ref.workflowIdPrefix);
    const scheduler = `WorkflowId = "${schedulerId}"`;

    await recordPath(stack.client, 'carrierScheduler-claim-loop', scheduler);

    // The next lap's first write fails: the lap fails, the run hands over again after its backoff.
    faults.loopStarts = 1;
    await recordPath(stack.client, 'carrierScheduler-claim-loop-failed-lap', scheduler);

    // Request-checks while one lap runs (no supersede meanwhile), sent into a fresh run so that they
    // and their answers fit before its rollover.
    const current = (await stack.client.workflow.getHandle(schedulerId).describe()).runId;
    const fresh = await waitFor(
      'a fresh scheduler run',
      async () => {
        const run = await stack.client.workflow.getHandle(schedulerId).describe();
        return run.runId !== current && run.status.name === 'RUNNING' ? run.runId : undefined;
      },
      60_000,
      100,
    );
    superseding = false;
    const request = (cardId: string) => ({ cardId, types: ['card_status' as const], lane: 'priority' as const, cooldownMs: 0, actor: 'recordHistories' });
    await requestCheck(ref, carrierId, request(first.id));
    await stack.client.workflow.getHandle(schedulerId).signal(requestCheckSignal, request(second.id));
    await wakeScheduler(ref, carrierId, first.id);
    // The lap claims the cards from the priority lane and starts their runs on the priority queue.
    await waitFor(
      "the requested cards' runs on the priority queue",
      async () => {
        let runs = 0;
        for await (const _ of stack.client.workflow.list({
          query: `TaskQueue = "${stack.taskQueues.cardPriority}" AND WorkflowId IN ("${cardWorkflowId(first.id, ref.workflowIdPrefix)}", "${cardWorkflowId(second.id, ref.workflowIdPrefix)}")`,
        }))
          runs += 1;
        return runs >= 2 || undefined;
      },
      30_000,
      200,
    );
    superseding = true;
    await recordPath(stack.client, 'carrierScheduler-claim-loop-request-check', `${scheduler} AND RunId = "${fresh}"`);
  } finally {
    stopped = true;
    await superseder.catch(() => undefined);
    for (const worker of started.workers) if (worker.getState() === 'RUNNING') worker.shutdown();
    await stack.close();
    await Promise.allSettled(started.runs);
    await started.connection.close();
  }
}

/**
 * Request-check signals beside the loop in bounded batches: a scheduler started here (no
 * pollingControl, so its arguments are this script's) handling at most one signal at a time, sent
 * three at once: the others stay pending while claim rounds go on.
 */
async function recordSignalBatches(): Promise<void> {
  // Ticking every second (no idle sleep: the cards are due every 10 minutes), so the first claim rounds come at once.
  const stack = await createStack('record-signals', { config: { SCHEDULER_LOOP: 'workflow', SCHEDULER_IDLE_MAX_MS: 0 } });
  try {
    const account = await seedAccount(stack, {
      name: 'sig1',
      qps: { main: 20 },
      typeGroups: { card_status: 'main' },
      cards: 3,
      intervalsSec: { card_status: 600 },
    });
    await stack.startWorkers();
    const workflowId = schedulerWorkflowId(account.carrier.id, stack.config.WORKFLOW_ID_PREFIX);
    const args: CarrierSchedulerArgs = {
      carrierId: account.carrier.id,
      taskQueues: stack.taskQueues,
      workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX,
      maxHistoryEvents: SCHEDULER_MAX_HISTORY_EVENTS,
      maxSignalsPerTick: 1,
    };
    const scheduler = await stack.client.workflow.start('carrierScheduler', { workflowId, taskQueue: stack.taskQueues.control, args: [args] });
    await waitFor('the first claim rounds', async () => ((await scheduler.query(schedulerStatusQuery)).rounds >= 2 ? true : undefined), 30_000, 200);
    await Promise.all(
      account.cards.map((card) =>
        scheduler.signal(requestCheckSignal, { cardId: card.id, types: ['card_status'], lane: 'priority', cooldownMs: 0, actor: 'recordHistories' }),
      ),
    );
    await recordPath(stack.client, 'carrierScheduler-signal-batches', `WorkflowId = "${workflowId}"`);
  } finally {
    await stack.close();
  }
}

/** Makes the cards due and claims them here, as the scheduler would, then starts their cardCheck runs. */
async function startClaimedCards(
  stack: Stack,
  carrierId: string,
  cardIds: readonly string[],
  tokenPrefix: string,
  types: readonly ('card_status' | 'carddata')[] = ['card_status', 'carddata'],
): Promise<Map<string, string>> {
  const dueAt = Date.now() - 1;
  const dues = Object.fromEntries(types.map((type) => [type, dueAt]));
  await stack.deps.store.upsertMany(cardIds.map((cardId) => ({ carrierId, cardId, dues })));
  const claim = await stack.deps.store.claim({
    carrierId,
    leaseMs: 20_000,
    inflightLimit: 10,
    priorityRatio: 0,
    tokenPrefix,
    typeGroups: {},
    countRealname: false,
  });
  const tokens = new Map(claim.claimed.map((c) => [c.cardId, c.token]));
  await Promise.all(
    cardIds.map(async (cardId) => {
      const token = tokens.get(cardId);
      if (token === undefined) throw new Error(`card ${cardId} was not claimed`);
      const args: CardCheckArgs = { carrierId, cardId, token, fromPriority: false, taskQueues: stack.taskQueues };
      await stack.client.workflow.start('cardCheck', {
        workflowId: cardWorkflowId(cardId, stack.config.WORKFLOW_ID_PREFIX),
        taskQueue: stack.taskQueues.card,
        args: [args],
        typedSearchAttributes: [
          { key: CARD_ID_ATTRIBUTE, value: cardId },
          { key: CARRIER_ID_ATTRIBUTE, value: carrierId },
        ],
      });
    }),
  );
  return tokens;
}

/** cardCheck paths that need a hand on the claim or the carrier: no scheduler, claims made here. */
async function recordCards(): Promise<void> {
  const stack = await createStack('record-cards', { config: FINISH_RETRY_CONFIG });
  try {
    // Finishes fail only for the cards put here (the finish outage below).
    const finishFailures = new Map<string, number>();
    failFinishes(stack, (cardId) => finishFailures.get(cardId) ?? 0);
    await stack.startWorkers(['card', 'ingest']);
    const cards = `WorkflowId STARTS_WITH "${stack.config.WORKFLOW_ID_PREFIX}card-"`;

    // Lost lease: slow calls; while the first step is at the carrier, another claim takes the card.
    const slow = await seedAccount(stack, {
      name: 'lost1',
      qps: { main: 50 },
      typeGroups: { card_status: 'main', carddata: 'main' },
      cards: 1,
      intervalsSec: { card_status: 600, carddata: 600 },
      simulator: { latencyMs: { p50: 1500, p99: 1500 } },
    });
    const card = slow.cards[0];
    if (!card) throw new Error('no card seeded');
    const token = (await startClaimedCards(stack, slow.carrier.id, [card.id], 'lost.1')).get(card.id) ?? '';
    await waitFor(
      'the first step at the carrier',
      async () => ((await stack.simulator.stats()).cards?.[card.iccid]?.calls ?? 0) === 1 || undefined,
      20_000,
      10,
    );
    const keys = stack.deps.store.keys(slow.carrier.id);
    const takenAt = Date.now();
    const thief = `lost.2@${takenAt}:${card.id}`;
    await stack.deps.redis
      .multi()
      .set(keys.claim(card.id), thief)
      .zrem(keys.running, token)
      .zadd(keys.running, takenAt + 20_000, thief)
      .zadd(keys.queue, takenAt + 20_000, card.id)
      .exec();
    await recordPath(stack.client, 'cardCheck-lease-lost', cards);

    // Deferral: the carrier admits one call a second for the account's group; two cards of one
    // type started together: the second card's call is refused (rate limited), its run deferred.
    const limited = await seedAccount(stack, {
      name: 'defer2',
      qps: { main: 50 },
      simulatorQps: { main: 0.001 },
      typeGroups: { card_status: 'main' },
      cards: 2,
      intervalsSec: { card_status: 600 },
    });
    await startClaimedCards(
      stack,
      limited.carrier.id,
      limited.cards.map((c) => c.id),
      'defer.1',
      ['card_status'],
    );
    await recordPath(stack.client, 'cardCheck-deferral', cards);

    // Redis away for the finish: one card's finish fails FINISH_FAILURES times, the other's never lands.
    const outage = await seedAccount(stack, {
      name: 'outage3',
      qps: { main: 50 },
      typeGroups: { card_status: 'main' },
      cards: 2,
      intervalsSec: { card_status: 600 },
    });
    const [recovers, never] = outage.cards;
    if (!recovers || !never) throw new Error('seeded fewer cards than asked');
    finishFailures.set(recovers.id, FINISH_FAILURES).set(never.id, Number.POSITIVE_INFINITY);
    await startClaimedCards(stack, outage.carrier.id, [recovers.id, never.id], 'outage.1', ['card_status']);
    await recordPath(stack.client, 'cardCheck-finish-lasting', cards);
    await recordPath(stack.client, 'cardCheck-finish-lease-lost', cards);
  } finally {
    await stack.close();
  }
}

/** A cardBatch run: a stack in the batch shape, every card due at once, one refused by the carrier. */
async function recordBatch(): Promise<void> {
  const stack = await createStack('record-batch', { config: { CARD_RUN_SHAPE: 'batch', CARD_BATCH_SIZE: 4 } });
  try {
    const account = await seedAccount(stack, {
      name: 'rec2',
      qps: { main: 20 },
      typeGroups: { card_status: 'main', carddata: 'main' },
      cards: 5,
      intervalsSec: { card_status: 600, carddata: 600 },
    });
    const carrierId = account.carrier.id;
    // An ICCID we accept that the simulator refuses (`invalid_iccid`): a failed card in its batch.
    const refused = await stack.services.lifecycle.createCards([{ iccid: '89860000000000008F', carrierId, status: 'active', enablePolling: true }]);
    const cards = [...account.cards, ...refused.created];
    const now = Date.now();
    await stack.deps.store.upsertMany(cards.map((card) => ({ carrierId, cardId: card.id, dues: { card_status: now, carddata: now } })));
    await stack.startWorkers();
    await ensurePollingControl(
      { client: stack.client, taskQueues: stack.taskQueues, workflowIdPrefix: stack.config.WORKFLOW_ID_PREFIX },
      { reconcileEveryMs: 2000 },
    );
    await recordPath(stack.client, 'cardBatch', `WorkflowId STARTS_WITH "${stack.config.WORKFLOW_ID_PREFIX}"`);
  } finally {
    await stack.close();
  }
}

/** A cardBatch whose finish flush fails more than 20 times: a stack without loops, its cards claimed here. */
async function recordBatchFinishOutage(): Promise<void> {
  // A flush attempt takes about 0.6 s (each card's call tried 3 times), so 20 of them take 12 s: a longer lasting bound.
  const stack = await createStack('record-batch-finish', {
    config: { CARD_RUN_SHAPE: 'batch', ...FINISH_RETRY_CONFIG, CARD_FINISH_RETRY_TIMEOUT_MS: 120_000 },
  });
  try {
    const account = await seedAccount(stack, {
      name: 'outage4',
      qps: { main: 50 },
      typeGroups: { card_status: 'main' },
      cards: 2,
      intervalsSec: { card_status: 600 },
    });
    const carrierId = account.carrier.id;
    // A flush attempt calls each card's finish 3 times: the short policy's 20 attempts fail, the
    // first lasting attempt's 20 too, and the second lands at its third attempt.
    failFinishes(stack, () => (20 + 20 + 2) * 3);
    await stack.startWorkers(['card', 'ingest']);
    const dueAt = Date.now() - 1;
    await stack.deps.store.upsertMany(account.cards.map((card) => ({ carrierId, cardId: card.id, dues: { card_status: dueAt } })));
    const claim = await stack.deps.store.claim({
      carrierId,
      leaseMs: 60_000,
      inflightLimit: 10,
      priorityRatio: 0,
      tokenPrefix: 'outage.2',
      typeGroups: {},
      countRealname: false,
    });
    const args: CardBatchArgs = {
      carrierId,
      cards: claim.claimed.map((c) => ({ cardId: c.cardId, token: c.token, fromPriority: c.fromPriority })),
      fromPriority: false,
      taskQueues: stack.taskQueues,
    };
    const workflowId = `${stack.config.WORKFLOW_ID_PREFIX}batch-outage`;
    await stack.client.workflow.start('cardBatch', { workflowId, taskQueue: stack.taskQueues.card, args: [args] });
    await recordPath(stack.client, 'cardBatch-finish-lasting', `WorkflowId = "${workflowId}"`);
  } finally {
    await stack.close();
  }
}

const groups = new Set(process.argv.slice(2).flatMap((arg) => (arg === 'card' ? ['loops', 'claimLoops', 'cards'] : [arg])));
const all = groups.size === 0;
for (const group of groups)
  if (!['loops', 'claimLoops', 'cards', 'batch'].includes(group)) throw new Error(`unknown group ${group}: card, loops, claimLoops, cards or batch`);
if (all || groups.has('loops')) {
  await recordLoops();
  await recordSignalBatches();
}
if (all || groups.has('claimLoops')) await recordClaimLoops();
if (all || groups.has('cards')) await recordCards();
if (all || groups.has('batch')) {
  await recordBatch();
  await recordBatchFinishOutage();
}
