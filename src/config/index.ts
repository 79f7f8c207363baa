/**
 * The one configuration schema. Every setting comes from the environment, is validated once at
 * start-up, and a bad value stops the process with a message naming the variable.
 */
import { existsSync } from 'node:fs';
import { z } from 'zod';
import { SCHEDULER_LOOPS } from '../workflow-safe/claimLoop.js';
import { CARD_RUN_SHAPES, DEFAULT_CARD_BATCH_SIZE, MAX_CARD_BATCH_SIZE } from '../workflow-safe/cardBatches.js';
import { defaultLogger } from '../runtime/logger.js';

/** The API token of loopback development setups (refused off loopback); the CLI uses it when API_TOKEN is unset and API_URL is loopback. */
export const DEV_API_TOKEN = 'dev-token-change-me';

const port = z.coerce.number().int().min(1).max(65535);
const positiveInt = z.coerce.number().int().positive();
const nonEmpty = z.string().trim().min(1);

/** A Redis Cluster node, `host:port` in REDIS_CLUSTER_NODES. */
export interface ClusterNode {
  readonly host: string;
  readonly port: number;
}

const HOST_PORT = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$/;

/** `host:port,host:port,…` → nodes; any malformed entry fails with the entry named. */
const clusterNodes = z.string().transform((value, ctx): ClusterNode[] => {
  const nodes: ClusterNode[] = [];
  for (const entry of value.split(',').map((part) => part.trim())) {
    const match = HOST_PORT.exec(entry);
    const port = Number(match?.[2]);
    if (!match || port < 1 || port > 65535) {
      ctx.addIssue({ code: 'custom', message: `must be a comma-separated list of host:port (bad entry ${JSON.stringify(entry)})` });
      return z.NEVER;
    }
    nodes.push({ host: match[1]!.replace(/^\[|\]$/g, ''), port });
  }
  return nodes;
});

const schema = z.object({
  /** Temporal frontend `host:port` every process connects to. */
  TEMPORAL_ADDRESS: nonEmpty.default('127.0.0.1:7233'),
  /** Temporal namespace of the workflows; it needs our search attributes (`npm run temporal:setup`). */
  TEMPORAL_NAMESPACE: nonEmpty.default('default'),
  /** Base URL of the Temporal Web UI, used to build links to a card's executions. */
  TEMPORAL_UI_URL: z.url().default('http://127.0.0.1:8233'),
  /**
   * Port of the Prometheus `/metrics` of the Temporal dev server the project starts itself (the
   * server's own and its Go runtime's memory figures, read by the overload bench); 0 leaves the
   * server to pick one.
   */
  TEMPORAL_DEV_METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(8234),
  /** Redis server (`redis://[user:password@]host:port[/db]`, `rediss://` for TLS); unused when REDIS_CLUSTER_NODES is set. */
  REDIS_URL: z.url().default('redis://127.0.0.1:6379'),
  /**
   * Redis Cluster seed nodes (`host:port,…`, any subset; the rest is discovered). When set, the
   * processes use the cluster and REDIS_URL is ignored by them.
   */
  REDIS_CLUSTER_NODES: clusterNodes.optional(),
  /** Prepended to every Redis key; lets several deployments (or tests) share one Redis. */
  REDIS_KEY_PREFIX: z.string().default(''),
  /**
   * `on`: a process refuses to start unless every Redis node's maxmemory-policy is `noeviction` (an
   * evicted lease or due score loses a card from polling), read with `CONFIG GET`. `off` skips the
   * check (logged at start) for managed Redis services that refuse `CONFIG`: make sure by other
   * means that the policy is `noeviction`.
   */
  REDIS_EVICTION_CHECK: z.enum(['on', 'off']).default('on'),
  /** PostgreSQL connection URL (`postgres://user:password@host:port/database`). */
  DATABASE_URL: z.url().default('postgres://postgres:postgres@127.0.0.1:5433/cardpoller'),
  /** PostgreSQL schema holding our tables; tests use one schema per test file. */
  DATABASE_SCHEMA: z
    .string()
    .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a lower-case SQL identifier')
    .default('public'),
  /**
   * PostgreSQL connections one process keeps open at most. Size it so that every process of the
   * deployment together stays under the server's `max_connections`.
   */
  DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(1000).default(20),
  /** Address the API listens on. Off loopback, the API refuses to start with the development API_TOKEN. */
  API_HOST: nonEmpty.default('127.0.0.1'),
  /** Port the API (and the dashboard) listens on. */
  API_PORT: port.default(8080),
  /**
   * Bearer token the API requires on every route but the health contract; the CLI sends it. The
   * default is a development token, accepted only while API_HOST is a loopback address.
   */
  API_TOKEN: z.string().min(8, 'must be at least 8 characters').default(DEV_API_TOKEN),
  /** Where the gateway simulator (`npm run sim`, tests and benches) listens. */
  SIMULATOR_HOST: nonEmpty.default('127.0.0.1'),
  /** Port of the gateway simulator. */
  SIMULATOR_PORT: port.default(8700),
  /** Base URL of the carrier gateway the card and gateway workers call. */
  GATEWAY_URL: z.url().default('http://127.0.0.1:8700'),
  /**
   * Connections a process keeps open to the gateway at most. A call granted a limiter slot that
   * finds none free before its send window ends is not sent (it queues again), so this must cover
   * the calls a process has on the wire at once — the gateway QPS it serves × the gateway's latency
   * — with room: at 256, a card worker with 300+ calls at once missed most windows.
   */
  GATEWAY_MAX_SOCKETS: z.coerce.number().int().min(1).max(65_535).default(1024),
  /** Task queue of the control and scheduler workflows and the claim activities (control workers). */
  TASK_QUEUE_CONTROL: nonEmpty.default('polling-control'),
  /** Task queue of the card runs (card workers). */
  TASK_QUEUE_CARD: nonEmpty.default('polling-card'),
  /**
   * Card runs claimed from the priority lane (request-checks): polled by the same card worker
   * processes as TASK_QUEUE_CARD, so a request never waits behind the normal lane's backlog.
   */
  TASK_QUEUE_CARD_PRIORITY: nonEmpty.default('polling-card-priority'),
  /** Task queue of the gateway calls when GATEWAY_STEPS=queue (gateway workers). */
  TASK_QUEUE_GATEWAY: nonEmpty.default('polling-gateway'),
  /** Task queue of the PostgreSQL writes of observations (ingest workers). */
  TASK_QUEUE_INGEST: nonEmpty.default('polling-ingest'),
  /** Prepended to workflow ids (`<prefix>card-<id>`); empty in production, unique per test stack. */
  WORKFLOW_ID_PREFIX: z
    .string()
    .regex(/^[a-zA-Z0-9._-]*$/, 'may only contain letters, digits, ".", "_" and "-"')
    .default(''),
  /**
   * Where card executions run their gateway steps: `local` activities of the card worker (no task
   * or extra events per step; the default) or the `polling-gateway` task queue (`queue`: gateway
   * callers on other hosts, at a workflow task, an activity task and six events per step).
   */
  GATEWAY_STEPS: z.enum(['local', 'queue']).default('local'),
  /**
   * How claimed cards' runs start: as children of carrierScheduler (`child`, the default: the Web
   * UI links each to its scheduler run) or by the claim activity with the client (`client`: no
   * parent workflow task per start and completion; for deployments bound by orchestration
   * throughput). Either way the run carries the ClaimedBy search attribute. Applies to the
   * workflow loop only (SCHEDULER_LOOP=workflow): a claim loop activity starts runs with the client.
   */
  CARD_START_MODE: z.enum(['child', 'client']).default('child'),
  /**
   * Where an account's claim loop runs: `activity` (the default) — laps of a long-running,
   * heartbeating claim loop activity per account (10 minutes each) that claims every tick and starts
   * the runs with the client, the scheduler waking only for its messages, a lap's end and
   * continue-as-new (docs/design.md, 'The claim loop as an activity'); `workflow` — a claim round
   * per workflow task of its carrierScheduler, a local activity and a timer every tick (an account
   * then costs about one action a second, busy or idle: docs/capacity.md, 'Many accounts').
   */
  SCHEDULER_LOOP: z.enum(SCHEDULER_LOOPS).default('activity'),
  /** Claim loop activities one control worker runs at once (SCHEDULER_LOOP=activity): one per account it serves. */
  WORKER_CLAIM_LOOPS: positiveInt.default(2000),
  /**
   * Longest an account's scheduler sleeps after a claim round that found nothing due and nothing
   * in flight: it wakes at the lanes' next due time, when a card is made due sooner (a lifecycle
   * write, a request-check, a configuration change, a resume), or after this long. 0 = never sleep
   * (a round every tick, busy or idle: the behaviour before 0.2). Each wake of an idle account costs
   * one workflow task and about two Temporal actions (docs/capacity.md).
   */
  SCHEDULER_IDLE_MAX_MS: z.coerce.number().int().min(0).max(3_600_000).default(60_000),
  /**
   * What one card-worker run carries: `card` (the default) — one `cardCheck` run per claimed card,
   * workflow id `card-<id>`, traced in the Web UI by `CardId`; `batch` — each claim round's cards of
   * an account in `cardBatch` runs of up to CARD_BATCH_SIZE cards (priority cards in batches of
   * their own, on the priority queue), every card executed exactly as in `cardCheck`, traced by
   * `CardIds`. For deployments bound by orchestration cost: a run's fixed cost is paid per batch.
   */
  CARD_RUN_SHAPE: z.enum(CARD_RUN_SHAPES).default('card'),
  /**
   * Cards per `cardBatch` run at most (CARD_RUN_SHAPE=batch); up to 90, so that the run's `CardIds`
   * search attribute stays under Temporal's 2 KB value limit (MAX_CARD_BATCH_SIZE).
   */
  CARD_BATCH_SIZE: z.coerce.number().int().min(1).max(MAX_CARD_BATCH_SIZE).default(DEFAULT_CARD_BATCH_SIZE),
  /** Card runs (workflow tasks) one card worker executes at once; with the card run shape, the cards it runs at once. */
  WORKER_CARD_MAX_WORKFLOWS: positiveInt.default(200),
  /** Activities one card worker executes at once (card bookkeeping, sync ingest). */
  WORKER_CARD_MAX_ACTIVITIES: positiveInt.default(200),
  /** Gateway calls one gateway worker (or, with GATEWAY_STEPS=local, one card worker) has in flight at once. */
  WORKER_GATEWAY_MAX_ACTIVITIES: positiveInt.default(400),
  /** Activities one control worker executes at once (claims, mode switches, maintenance). */
  WORKER_CONTROL_MAX_ACTIVITIES: positiveInt.default(100),
  /** Activities one ingest worker executes at once. */
  WORKER_INGEST_MAX_ACTIVITIES: positiveInt.default(100),
  /**
   * Card worker processes the deployment runs. The control worker cannot count
   * the card workers polling its queue, so it caps each account's in-flight limit at this many times
   * the cards one card worker runs at once: claims beyond what the card workers can run would wait
   * in Temporal's task queue, where their leases run out. Set it to the card worker replicas.
   */
  CARD_WORKER_COUNT: z.coerce.number().int().min(1).max(10_000).default(4),
  /** Async ingest: batches written at once per ingest process, and records per batch at most. */
  INGEST_CONCURRENCY: positiveInt.default(30),
  /** Async ingest: records one batch writes at most. */
  INGEST_BATCH_SIZE: positiveInt.default(500),
  /** Pushed carrier events stored and not yet applied above which POST /v1/events answers 429 (docs/design.md, 'Freshness'). */
  EVENTS_MAX_BACKLOG: positiveInt.default(100_000),
  /** Ingest backlog (records pending, age of the oldest) above which the alert opens and claiming is tightened. */
  INGEST_BACKLOG_THRESHOLD: positiveInt.default(20_000),
  /** Age of the oldest pending ingest record (ms) above which the backlog alert opens and claiming is tightened. */
  INGEST_BACKLOG_MAX_AGE_MS: positiveInt.default(60_000),
  /**
   * Records the async-ingest stream holds at most (checked before each hand-off, so approximate by
   * the hand-offs under way). Every entry in it is a record not yet in PostgreSQL (a commit removes
   * its entries), so it is never trimmed: a record that finds it full is written by the card worker
   * itself instead, as in sync ingest, retried while PostgreSQL is away. Bounds Redis memory in a
   * long PostgreSQL outage (~1 kB a record); 25 × the default backlog threshold.
   */
  INGEST_STREAM_MAX_RECORDS: positiveInt.default(500_000),
  /**
   * Months of observations and execution rows kept, the current month included; older observation
   * partitions are dropped and older execution rows deleted by the hourly storage maintenance.
   */
  RETENTION_MONTHS: z.coerce.number().int().min(1).max(120).default(3),
  /**
   * Days applied pushed events are kept (their observations stay for RETENTION_MONTHS): the rows
   * only answer a replayed event id as a duplicate, and 2 000 events/s kept for months would be
   * billions of rows.
   */
  EVENTS_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(7),
  /** Time in-flight activities get to finish when a worker shuts down. */
  WORKER_SHUTDOWN_GRACE_MS: positiveInt.default(10_000),
  /** Where a worker process serves `/metrics`, `/livez` and `/readyz`; port 0 picks a free one (printed at start). */
  WORKER_METRICS_HOST: nonEmpty.default('127.0.0.1'),
  /** Port of a worker process' `/metrics`, `/livez` and `/readyz`; 0 picks a free one (printed at start). */
  WORKER_METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(0),
  /**
   * Temporal worker versioning: `on` makes every worker poll as version
   * WORKER_DEPLOYMENT_NAME / WORKER_BUILD_ID (cardCheck pinned to the version that started it, the
   * loops auto-upgrading); new runs go to a version once it is set current.
   */
  WORKER_VERSIONING: z.enum(['off', 'on']).default('off'),
  /** Worker deployment name the workers poll as when WORKER_VERSIONING=on. */
  WORKER_DEPLOYMENT_NAME: nonEmpty.default('card-poller'),
  /** Build id of this deployment version; empty derives it from the workflow bundle's content. */
  WORKER_BUILD_ID: z
    .string()
    .regex(/^[a-zA-Z0-9._-]*$/, 'may only contain letters, digits, ".", "_" and "-"')
    .default(''),
  /**
   * A workflow bundle file to load instead of bundling `src/workflows` at start (seconds of CPU per
   * process): e.g. the `dist/workflow-bundle.js` of `npm run build` for processes run from the
   * sources. Empty: the compiled entries load that file, tsx entries bundle at start.
   */
  WORKFLOW_BUNDLE_PATH: z
    .string()
    .default('')
    .refine((path) => path === '' || existsSync(path), 'no such file (a workflow bundle, e.g. dist/workflow-bundle.js of `npm run build`)'),
  /**
   * Where a worker runs its workflow sandbox: `worker`, a worker thread of its own, so workflow code
   * never delays the activities on the main event loop (production); `main`, the process' main
   * thread, which starts a worker in ~0.1 s of CPU instead of ~1–2 s (the tests' in-process stacks,
   * which start some hundred workers per run). The 5 s deadlock detection applies in both.
   */
  WORKFLOW_SANDBOX_THREAD: z.enum(['worker', 'main']).default('worker'),
  /** Level of the JSON log lines every process writes. */
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Folder for service data (database files, Redis AOF), relative to the project root. */
  DATA_DIR: nonEmpty.default('.data'),
  /**
   * Lifecycle outbox (src/lifecycle/outboxRelay.ts): how long the relay leaves an event's rows to
   * the event's own writer (it applies them right after its commit) before taking them over.
   */
  LIFECYCLE_OUTBOX_GRACE_MS: positiveInt.default(5000),
  /** How often each control-worker process looks for lifecycle outbox rows to apply; a failing row's backoff starts here and doubles. */
  LIFECYCLE_OUTBOX_RELAY_INTERVAL_MS: positiveInt.default(1000),
  /** Lifecycle outbox rows the relay takes at once. */
  LIFECYCLE_OUTBOX_BATCH_SIZE: positiveInt.default(1000),
  /** Longest wait between two attempts of a lifecycle outbox row that keeps failing (Redis away). */
  LIFECYCLE_OUTBOX_RETRY_MAX_MS: positiveInt.default(60_000),
  /**
   * Period of the lifecycle reconcile (src/lifecycle/reconcile.ts): one control-worker process at
   * a time (a Redis lock) compares every account's polled cards in PostgreSQL with its lanes and
   * repairs what differs (metric cardpoller_lifecycle_repairs_total).
   */
  LIFECYCLE_RECONCILE_INTERVAL_MS: positiveInt.default(300_000),
  /**
   * A card's finish while Redis is away (src/workflows/finishRetry.ts): after its 20 quick attempts
   * it is retried from this wait, doubling up to CARD_FINISH_RETRY_MAX_INTERVAL_MS.
   */
  CARD_FINISH_RETRY_INITIAL_MS: positiveInt.default(200),
  /** Longest wait between two attempts of a card's finish while Redis is away. */
  CARD_FINISH_RETRY_MAX_INTERVAL_MS: positiveInt.default(60_000),
  /**
   * How long a card's finish is retried while Redis is away (a day: as long as the run's records may
   * still land); then the records are written without it (outcome lease_lost).
   */
  CARD_FINISH_RETRY_TIMEOUT_MS: positiveInt.default(86_400_000),
});

export type Config = z.infer<typeof schema>;

/** The schema itself, for the generated reference (`npm run docs:config` → docs/configuration.md). */
export const configSchema = schema;

export interface TaskQueues {
  readonly control: string;
  readonly card: string;
  readonly cardPriority: string;
  readonly gateway: string;
  readonly ingest: string;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    readonly value: string | undefined,
    readonly reason: string,
  ) {
    super(`Invalid configuration: ${variable}=${value === undefined ? '(unset)' : JSON.stringify(value)}: ${reason}`);
    this.name = 'ConfigError';
  }
}

/** Parses and validates the environment. Throws {@link ConfigError} naming the first bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const input: Record<string, string> = {};
  for (const key of Object.keys(schema.shape)) {
    const value = env[key];
    // An empty variable means "use the default", as shells commonly export FOO= to unset.
    if (value !== undefined && value !== '') input[key] = value;
  }
  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const variable = String(issue?.path[0] ?? 'unknown');
    throw new ConfigError(variable, env[variable], issue?.message ?? 'invalid');
  }
  return parsed.data;
}

export function taskQueues(config: Config): TaskQueues {
  return {
    control: config.TASK_QUEUE_CONTROL,
    card: config.TASK_QUEUE_CARD,
    cardPriority: config.TASK_QUEUE_CARD_PRIORITY,
    gateway: config.TASK_QUEUE_GATEWAY,
    ingest: config.TASK_QUEUE_INGEST,
  };
}

/**
 * Loads the configuration or exits the process (status 2) with the error as a JSON log line at
 * `fatal` (for entry points; LOG_LEVEL is not known yet, so the default logger writes it).
 */
export function loadConfigOrExit(env: NodeJS.ProcessEnv = process.env): Config {
  try {
    return loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      defaultLogger().fatal({ variable: error.variable, reason: error.reason }, error.message);
      process.exit(2);
    }
    throw error;
  }
}
