/**
 * Builds the worker of one task queue. Each queue scales on its own: control runs
 * the control/scheduler workflows and the claim activity, card runs cardCheck and cardBatch
 * workflows and the Redis bookkeeping, gateway runs the gateway calls, ingest the PostgreSQL writes.
 */
import { log as activityLog } from '@temporalio/activity';
import { Client } from '@temporalio/client';
import type { VersioningBehavior, WorkerDeploymentVersion } from '@temporalio/common';
import { NativeConnection, Worker, type WorkerDeploymentOptions, type WorkflowBundleOption } from '@temporalio/worker';
import type { Config, TaskQueues } from '../config/index.js';
import { taskQueues } from '../config/index.js';
import type { RuntimeDeps } from '../runtime/deps.js';
import { DEFAULT_RETENTION, createControlActivities } from '../activities/control.js';
import { claimLoopTaskQueue, type ClaimLoopInput } from '../workflow-safe/claimLoop.js';
import { createCardActivities } from '../activities/card.js';
import { createGatewayActivities } from '../activities/gateway.js';
import { createIngestActivities } from '../activities/ingest.js';
import { createPackageEvaluator } from '../activities/packageEvaluation.js';
import type { ModeSwitcher, PriorityClaims, PriorityTransitions, RedisGuard, RequestChecker } from '../app/ports.js';
import { createSchedulerStarter } from '../app/schedulerStarter.js';
import { createClientCardStarter, type CardStarter } from '../app/cardStarter.js';
import { createSharedBatchStarter } from '../app/sharedBatchStarter.js';
import { runningSchedulers } from '../app/temporalControl.js';
import { BackgroundWork } from '../activities/backgroundWork.js';
import { IngestStream } from '../ingest/stream.js';
import { stalenessObserver } from '../ingest/stalenessMetric.js';
import { createIngestPressure } from '../ingest/pressure.js';
import { ingestSettings } from '../ingest/service.js';
import { runIngestWithWorker } from '../ingest/withWorker.js';
import { bindActivityLogFields } from './activityLogFields.js';
import { createBookkeepingBatchActivities } from '../activities/bookkeepingBatch.js';
import { reconcileOnAccountChange } from './reconcileOnAccountChange.js';
import { currentVersionLeft } from './currentVersionWatch.js';

export const WORKER_KINDS = ['control', 'card', 'gateway', 'ingest'] as const;
export type WorkerKind = (typeof WORKER_KINDS)[number];

export interface WorkerServices {
  readonly requests: RequestChecker;
  readonly modes: ModeSwitcher;
  readonly priority: PriorityTransitions & PriorityClaims;
  readonly redisGuard?: RedisGuard;
}

export interface WorkerSetup {
  readonly kind: WorkerKind;
  readonly config: Config;
  readonly connection: NativeConnection;
  readonly deps: RuntimeDeps;
  readonly services: WorkerServices;
  /** Built once and shared by the workers of one process (or the prebuilt bundle's path). */
  readonly workflowBundle: WorkflowBundleOption;
  /** Overrides the configured task-queue names (tests use unique ones). */
  readonly taskQueues?: TaskQueues;
  /** Polls as this worker-deployment version (worker versioning); unversioned when absent. */
  readonly deploymentVersion?: WorkerDeploymentVersion;
}

/**
 * Every workflow stays on the worker-deployment version that runs it (pinned): a change in
 * command order cannot reach a run that started on other code. A card run is short, so its old
 * version drains within minutes. The loops (pollingControl, carrierScheduler) run for weeks: they
 * move to the current version at continue-as-new, which they do regularly and at once when the
 * server says their target version changed (`continueAsNewToCurrentVersion` in
 * src/workflows/versionUpgrade.ts). Activity-only workers: the behavior applies to workflows and
 * is required by the options type.
 */
const VERSIONING_BEHAVIOR: Readonly<Record<WorkerKind, VersioningBehavior>> = {
  control: 'PINNED',
  card: 'PINNED',
  gateway: 'PINNED',
  ingest: 'PINNED',
};

/** Whole batches whose cards' local activities one card worker runs at once, at least (CARD_RUN_SHAPE=batch). */
const BATCHES_AT_ONCE = 4;

type CapacityConfig = Pick<
  Config,
  'CARD_RUN_SHAPE' | 'CARD_BATCH_SIZE' | 'GATEWAY_STEPS' | 'WORKER_CARD_MAX_WORKFLOWS' | 'WORKER_CARD_MAX_ACTIVITIES' | 'WORKER_GATEWAY_MAX_ACTIVITIES'
>;

/**
 * Local activity slots of one card worker: card bookkeeping and the records of sync ingest, plus,
 * with local gateway steps, as many steps (which may wait on the rate limiter) as the gateway queue
 * would run. In the batch shape a workflow slot carries up to CARD_BATCH_SIZE cards whose local
 * activities all start at once: room for at least {@link BATCHES_AT_ONCE} whole batches, so a
 * batch's cards do not queue for slots behind a single other batch.
 */
export function cardLocalActivitySlots(config: CapacityConfig): number {
  const slots = config.WORKER_CARD_MAX_ACTIVITIES + (config.GATEWAY_STEPS === 'local' ? config.WORKER_GATEWAY_MAX_ACTIVITIES : 0);
  return config.CARD_RUN_SHAPE === 'batch' ? Math.max(slots, config.CARD_BATCH_SIZE * BATCHES_AT_ONCE) : slots;
}

/**
 * Cards one card worker runs at once. `card` shape: one per workflow slot (a cardCheck holds its
 * workflow task, and so its slot, while its local activities run). `batch`: a batch shares one
 * workflow slot among its cards, and each card holds a local activity slot while it runs, so the
 * local activity slots bound it (and the workflow slots times the batch size).
 */
export function cardsPerCardWorker(config: CapacityConfig): number {
  if (config.CARD_RUN_SHAPE === 'card') return config.WORKER_CARD_MAX_WORKFLOWS;
  return Math.min(config.WORKER_CARD_MAX_WORKFLOWS * config.CARD_BATCH_SIZE, cardLocalActivitySlots(config));
}

/**
 * Cards the deployment's card workers run at once: the cap of each account's in-flight limit. The
 * control worker cannot count the card workers polling its queue, so the deployment states their
 * number (CARD_WORKER_COUNT): claims beyond what the card workers can run would wait in Temporal's
 * task queue, where their leases run out, instead of in Redis.
 */
export function deploymentCardCapacity(config: CapacityConfig & Pick<Config, 'CARD_WORKER_COUNT'>): number {
  return cardsPerCardWorker(config) * config.CARD_WORKER_COUNT;
}

/**
 * WORKFLOW_SANDBOX_THREAD: the SDK runs the sandbox on the main thread only in its debug mode,
 * which also lifts the deadlock timeout; it is set back to the SDK's default of 5 s.
 */
export function sandboxThreadOptions(thread: Config['WORKFLOW_SANDBOX_THREAD']): { debugMode?: boolean; isolateExecutionTimeout?: string } {
  return thread === 'main' ? { debugMode: true, isolateExecutionTimeout: '5s' } : {};
}

export function deploymentOptions(kind: WorkerKind, version: WorkerDeploymentVersion | undefined): { workerDeploymentOptions?: WorkerDeploymentOptions } {
  if (!version) return {};
  return { workerDeploymentOptions: { version, useWorkerVersioning: true, defaultVersioningBehavior: VERSIONING_BEHAVIOR[kind] } };
}

/**
 * The workers of one kind: one per task queue it serves. A card worker process also polls the
 * priority lane's queue with a second worker of the same activities and limits, so a
 * request-check's run never waits behind the normal lane's backlog on the card queue.
 */
export async function createWorkers(setup: WorkerSetup): Promise<Worker[]> {
  if (setup.kind !== 'card') return [await createWorker(setup)].flat();
  const queues = setup.taskQueues ?? taskQueues(setup.config);
  return (await Promise.all([createWorker(setup), createWorker({ ...setup, taskQueues: { ...queues, card: queues.cardPriority } })])).flat();
}

/**
 * The card worker's activities: card bookkeeping, the records of sync ingest, (GATEWAY_STEPS=local)
 * the gateway steps, and the batched bookkeeping of cardBatch runs, which calls the same ones.
 */
function cardWorkerActivities(setup: WorkerSetup) {
  const { config, deps } = setup;
  const card = createCardActivities({
    pool: deps.pool,
    store: deps.store,
    reference: deps.reference,
    packages: createPackageEvaluator(deps.pool),
    priority: setup.services.priority,
    metrics: deps.metrics,
    gatewaySteps: config.GATEWAY_STEPS,
    log: (line) => deps.logger.warn({ component: 'cardActivities' }, line),
    finishRetry: {
      initialIntervalMs: config.CARD_FINISH_RETRY_INITIAL_MS,
      maximumIntervalMs: config.CARD_FINISH_RETRY_MAX_INTERVAL_MS,
      timeoutMs: config.CARD_FINISH_RETRY_TIMEOUT_MS,
    },
  });
  const ingest = createIngestActivities({
    pool: deps.pool,
    priority: setup.services.priority,
    stream: new IngestStream(deps.redis, config.REDIS_KEY_PREFIX, { maxRecords: config.INGEST_STREAM_MAX_RECORDS }),
    log: (line) => deps.logger.warn({ component: 'ingestActivities' }, line),
    learned: stalenessObserver(deps.registry),
  });
  return {
    ...card,
    ...ingest,
    ...createGatewayActivities({ client: deps.gateway, limiter: deps.limiter, store: deps.store, metrics: deps.metrics }),
    ...createBookkeepingBatchActivities({ ...card, ...ingest }),
  };
}

/** How claimed cards' runs start with the client: in batches shared across accounts when claim loops run as activities (src/app/sharedBatchStarter.ts). */
function cardStarterOf(config: Config, client: Client): CardStarter {
  const log = (message: string, fields: Record<string, unknown>): void => void activityLog.warn(message, fields);
  if (config.SCHEDULER_LOOP === 'activity' && config.CARD_RUN_SHAPE === 'batch')
    return createSharedBatchStarter(client, log, { batchSize: config.CARD_BATCH_SIZE });
  return createClientCardStarter(client, log, { runShape: config.CARD_RUN_SHAPE, batchSize: config.CARD_BATCH_SIZE });
}

/** How long past WORKER_SHUTDOWN_GRACE_MS a worker still waits for cancelled activities to end. */
const SHUTDOWN_FORCE_AFTER_GRACE_MS = 15_000;

/** One worker, or (control, SCHEDULER_LOOP=activity) the control worker and the claim loops' worker. */
async function createWorker(setup: WorkerSetup): Promise<Worker | Worker[]> {
  const { config, deps, kind } = setup;
  const queues = setup.taskQueues ?? taskQueues(config);
  const common = {
    connection: setup.connection,
    namespace: config.TEMPORAL_NAMESPACE,
    shutdownGraceTime: config.WORKER_SHUTDOWN_GRACE_MS,
    // After the grace, activities are cancelled; one that ignores it (a call with no timeout) would
    // keep the worker, and the process, from ever stopping: Ctrl-C of `npm start` once hung
    // 15 minutes (CI fault suite). Force the shutdown a while after the grace instead.
    shutdownForceTime: config.WORKER_SHUTDOWN_GRACE_MS + SHUTDOWN_FORCE_AFTER_GRACE_MS,
    interceptors: { activity: [bindActivityLogFields] },
    ...deploymentOptions(kind, setup.deploymentVersion),
    ...sandboxThreadOptions(config.WORKFLOW_SANDBOX_THREAD),
  };
  switch (kind) {
    case 'control': {
      // A claim round's run starts that outlast its wait for them finish here; the process awaits
      // them (bounded) before it closes the Temporal connection they use.
      const background = new BackgroundWork((message, fields) => deps.logger.warn({ component: 'claimRound', ...fields }, message));
      deps.beforeClose(async () => {
        const left = await background.settle(config.WORKER_SHUTDOWN_GRACE_MS);
        if (left > 0) deps.logger.warn({ component: 'claimRound', left }, 'run starts still under way at shutdown: their claims wait for their lease');
      });
      const controlClient = new Client({ connection: setup.connection, namespace: config.TEMPORAL_NAMESPACE });
      const activities = createControlActivities({
        pool: deps.pool,
        store: deps.store,
        limiter: deps.limiter,
        reference: deps.reference,
        requests: setup.services.requests,
        modes: setup.services.modes,
        ...(setup.services.redisGuard ? { redisGuard: setup.services.redisGuard } : {}),
        metrics: deps.metrics,
        cardCapacity: deploymentCardCapacity(config),
        retention: { ...DEFAULT_RETENTION, keepMonths: config.RETENTION_MONTHS, eventDays: config.EVENTS_RETENTION_DAYS },
        ingestPressure: createIngestPressure(new IngestStream(deps.redis, config.REDIS_KEY_PREFIX), ingestSettings(config).thresholds),
        // In child start mode too: a scheduler run about to continue as new has its last rounds' runs started here.
        cardStartMode: config.CARD_START_MODE,
        idleMaxMs: config.SCHEDULER_IDLE_MAX_MS,
        runShape: config.CARD_RUN_SHAPE,
        batchSize: config.CARD_BATCH_SIZE,
        runningSchedulers: () => runningSchedulers({ client: controlClient, workflowIdPrefix: config.WORKFLOW_ID_PREFIX }),
        schedulerStarter: createSchedulerStarter(controlClient, (message, fields) => deps.logger.warn({ component: 'pollingControl', ...fields }, message)),
        cardStarter: cardStarterOf(config, controlClient),
        background,
        schedulerLoop: config.SCHEDULER_LOOP,
        ...(setup.deploymentVersion ? { currentVersionLeft: currentVersionLeft(controlClient, queues.control, setup.deploymentVersion) } : {}),
      });
      const worker = await Worker.create({
        ...common,
        taskQueue: queues.control,
        workflowBundle: setup.workflowBundle,
        activities,
        maxConcurrentActivityTaskExecutions: config.WORKER_CONTROL_MAX_ACTIVITIES,
      });
      // Account changes made anywhere (API, lifecycle, import, SQL by hand) reach pollingControl
      // as a reconcile at once; it ends with this worker, before the process closes its connections.
      const accountChanges = reconcileOnAccountChange(worker, {
        connection: setup.connection,
        namespace: config.TEMPORAL_NAMESPACE,
        workflowIdPrefix: config.WORKFLOW_ID_PREFIX,
        databaseUrl: config.DATABASE_URL,
        schema: config.DATABASE_SCHEMA,
        logger: deps.logger.child({ component: 'accountChanges' }),
      });
      deps.beforeClose(() => accountChanges.stop());
      if (config.SCHEDULER_LOOP !== 'activity') return worker;
      // The claim loops on a queue of their own: each holds an activity slot for its whole lap.
      const loopWorker = await Worker.create({
        ...common,
        taskQueue: claimLoopTaskQueue(queues.control),
        activities: { runClaimLoop: (input: ClaimLoopInput) => activities.runClaimLoop(input) },
        maxConcurrentActivityTaskExecutions: config.WORKER_CLAIM_LOOPS,
      });
      return [worker, loopWorker];
    }
    case 'card':
      return Worker.create({
        ...common,
        taskQueue: queues.card,
        workflowBundle: setup.workflowBundle,
        // Card bookkeeping, the records of sync ingest and (GATEWAY_STEPS=local) the gateway steps
        // run here as local activities of cardCheck and cardBatch.
        activities: cardWorkerActivities(setup),
        maxConcurrentWorkflowTaskExecutions: Math.min(config.WORKER_CARD_MAX_WORKFLOWS, 1000),
        maxCachedWorkflows: config.WORKER_CARD_MAX_WORKFLOWS * 2,
        maxConcurrentActivityTaskExecutions: config.WORKER_CARD_MAX_ACTIVITIES,
        maxConcurrentLocalActivityExecutions: cardLocalActivitySlots(config),
      });
    case 'gateway':
      return Worker.create({
        ...common,
        taskQueue: queues.gateway,
        activities: createGatewayActivities({ client: deps.gateway, limiter: deps.limiter, store: deps.store, metrics: deps.metrics }),
        maxConcurrentActivityTaskExecutions: config.WORKER_GATEWAY_MAX_ACTIVITIES,
      });
    case 'ingest': {
      const worker = await Worker.create({
        ...common,
        taskQueue: queues.ingest,
        activities: createIngestActivities({
          pool: deps.pool,
          priority: setup.services.priority,
          log: (line) => deps.logger.warn({ component: 'ingestActivities' }, line),
          learned: stalenessObserver(deps.registry),
        }),
        maxConcurrentActivityTaskExecutions: config.WORKER_INGEST_MAX_ACTIVITIES,
      });
      // The async ingest's stream consumer lives as long as this worker, and ends before the
      // process closes its connections (its last tick would otherwise meet a closed one).
      const ingest = runIngestWithWorker(worker, {
        redis: deps.redis,
        namespace: config.REDIS_KEY_PREFIX,
        pool: deps.pool,
        priority: setup.services.priority,
        settings: ingestSettings(config),
        registry: deps.registry,
        logger: deps.logger.child({ component: 'ingest' }),
        events: { store: deps.store, reference: deps.reference },
      });
      deps.beforeClose(() => ingest.stop());
      return worker;
    }
  }
}
