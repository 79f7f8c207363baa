/**
 * Command line and environment of `npm run bench`. Every duration has a default that keeps one
 * scenario within a few minutes on a 2-core machine (steady: 10 minutes, as the target says);
 * flags win over BENCH_* variables so a one-off run needs no environment changes.
 */
import { RESULTS_DIR } from './report.js';
import { SCHEDULER_LOOPS, type SchedulerLoop } from '../../src/workflow-safe/claimLoop.js';

/** Canonical order: the ceiling and throughput measure the capacity the later scenarios size from. */
export const SCENARIOS = [
  'ceiling',
  'throughput',
  'saturate',
  'steady',
  'priority',
  'overload',
  'burst',
  'sweep',
  'direct',
  'scale',
  'ingest',
  'footprint',
  'accounts',
  'freshness',
  'cluster',
] as const;
export type ScenarioName = (typeof SCENARIOS)[number];
/**
 * Run only when named: they need more than the shared services (cluster: the Temporal cluster's
 * binaries, minutes to build), or take long (accounts: ~5 minutes per fleet size and variant;
 * freshness: 10 minutes per strategy).
 */
const OPT_IN: ReadonlySet<ScenarioName> = new Set<ScenarioName>(['accounts', 'freshness', 'cluster']);

export const START_MODES = ['child', 'client'] as const;
export type StartMode = (typeof START_MODES)[number];
/** Card execution shapes: one gateway type per execution, or card_status + carddata + realname. */
export const SHAPES = ['single', 'three'] as const;
export type Shape = (typeof SHAPES)[number];
/** CARD_RUN_SHAPE: one cardCheck run per card, or cardBatch runs of up to CARD_BATCH_SIZE cards. */
export const RUN_SHAPES = ['card', 'batch'] as const;
export type RunShape = (typeof RUN_SHAPES)[number];

export interface BenchOptions {
  readonly scenarios: readonly ScenarioName[];
  /** Seconds before the measuring window opens (undefined = the scenario's default). */
  readonly warmupSec: number | undefined;
  /** Length of the measuring window in seconds (undefined = the scenario's default). */
  readonly durationSec: number | undefined;
  /** steady only: its window (wins over durationSec; default 600 s). */
  readonly steadyDurationSec: number | undefined;
  /** overload only: its window per start mode (wins over durationSec; default 600 s). */
  readonly overloadDurationSec: number | undefined;
  /** scale: cards written to Redis. */
  readonly cards: number;
  /** scale: through the lifecycle service (PostgreSQL + Redis) or straight into Redis. */
  readonly importMode: 'lifecycle' | 'redis';
  /** priority: request-checks per second. */
  readonly requestRate: number;
  /** throughput: how card runs start (CARD_START_MODE), each variant measured in the same invocation. */
  readonly startModes: readonly StartMode[];
  /** throughput: execution shapes measured for each start mode. */
  readonly shapes: readonly Shape[];
  /** throughput, steady: run shapes (CARD_RUN_SHAPE) measured, each variant in the same invocation. */
  readonly runShapes: readonly RunShape[];
  /** throughput: how many times each variant runs (variants alternate). */
  readonly rounds: number;
  /** accounts: the fleet sizes (small accounts) measured. */
  readonly accountCounts: readonly number[];
  /** accounts, burst, sweep: SCHEDULER_LOOP per variant. */
  readonly schedulerLoops: readonly SchedulerLoop[];
  /** Run even when the machine is busy; every result is then marked invalid. */
  readonly allowBusy: boolean;
  /** Keep the dev server's database between scenarios (default: each timed scenario after the first gets a fresh one). */
  readonly keepTemporalDb: boolean;
  /** Where <scenario>.json and .md go. */
  readonly outDir: string;
  readonly help: boolean;
}

export const HELP = `usage: npm run bench -- [--scenario NAME[,NAME…]] [options]

Scenarios (default: all but cluster, in this order; ceiling always runs before throughput):
  ceiling     the dev server's cheapest workflow (client-started, no activity): workflows/s, server CPU ms each;
              and the card-execution shape (what throughput runs), executions/s, in the same run
  throughput  budgets high, gateway latency ~0: checks/s per start mode, shape and run shape, as a ratio to the
              no-activity ceiling; history events, workflow tasks and Temporal Cloud actions per check; CPU per
              check; batch ÷ card and ÷ the direct loop (a brief direct measurement when direct has not run);
              the 5 M-card example of docs/capacity.md computed from the figures
  saturate    3 accounts with far more due cards than their budgets (budgets scaled below the measured capacity):
              utilisation, rejected calls, deferrals
  steady      offered load at 70 % of the measured capacity (budgets scaled up to it when below) for 10 minutes
              per run shape: lateness, expired leases, rejected calls
  priority    a normal lane in backlog + request-checks at a fixed rate: request → first gateway call p50/p99
  overload    offered load at 2× the measured capacity for 10 minutes per start mode (card run shape) with
              request-checks throughout: longest gap between two claim rounds of any scheduler (continue-as-new
              included), workflow task failures and timeouts, expired leases, rejected calls, request → gateway call
              p99, each account's share of executions against its budget share, RSS of each process (levels off?)
  burst       500 request-checks at once (100 concurrent) to one account of 1 000 cards on 6 QPS, then the same 500
              again, beside 3 accounts at a steady load, per scheduler loop (batch runs): answers, workflow task
              timeouts, the longest gap between the account's claim rounds, the priority lane's drain against the
              budget, the other accounts' checks/s and lateness during the burst against before it
  sweep       600 request-checks to one account whose carrier answers every call with a transient error, per
              scheduler loop: the priority retry sweeps requeue the failing items round after round; the longest gap
              between the account's claim rounds, items swept, workflow task timeouts
  direct      the throughput workload through a direct loop over the same Lua scripts (no Temporal)
  freshness   (only when named) 20 000 cards on 5 QPS, 1 % changing card_status per hour, per strategy (polling
              alone; pushed events): changes found in the window, staleness p50/p99 (the simulator's ground truth),
              calls/s and budget share; then 2 000 pushed events/s for 60 s: accepted, refused, lost, duplicated
  scale       N cards in Redis: memory per card, claim round p99, import time
  ingest      sync vs async ingest on the same load: rows/s, SQL statements per execution; the backlog,
              backpressure and alert during a PostgreSQL pause (BENCH_INGEST_PAUSE_SEC, default 60)
  accounts    (only when named) N small accounts (20 cards, card_status every 600 s) beside 10 idle accounts and
              a big one, per start mode and run shape, the schedulers' idle sleep on, and off up to 100 accounts
              (SCHEDULER_IDLE_MAX_MS=0): workflow tasks and actions per idle and per small account-second,
              pollingControl's, lateness p99, the big account's checks/s against its offer, Temporal and worker CPU
  footprint   per-unit costs for docs/capacity.md: Redis bytes per card, PostgreSQL rows and bytes per execution,
              Temporal events, tasks and actions per execution (1 and 3 types, per start mode); counts, not
              time, so it also runs on a busy machine (the report says how busy it was)
  cluster     (only when named) the throughput workload on the dev server and on the local Temporal cluster
              (127.0.0.1:7333, four processes on PostgreSQL; brought up when down; its binaries are built once with
              \`npm run temporal:cluster -- build\`, minutes), dev/cluster/cluster/dev per round: executions/s, ratio,
              events, tasks and CPU per execution; claim round p50/p99 on Redis Cluster vs single Redis

Options (flag / environment):
  --scenario NAME       BENCH_SCENARIO           comma-separated list
  --warmup SEC          BENCH_WARMUP_SEC         seconds before the measuring window (per-scenario default)
  --duration SEC        BENCH_DURATION_SEC       measuring window in seconds (per-scenario default)
  --steady-duration SEC BENCH_STEADY_DURATION_SEC steady's window only, per run shape (default 600)
  --overload-duration SEC BENCH_OVERLOAD_DURATION_SEC overload's window only, per start mode (default 600)
  --cards N             BENCH_CARDS              scale: cards to import (default 1000000)
  --import MODE         BENCH_IMPORT             scale: redis (upsert.lua only, default) or lifecycle (PostgreSQL + Redis)
  --request-rate R      BENCH_REQUEST_RATE       priority, overload: request-checks per second (default 1)
  --start-modes LIST    BENCH_START_MODES        throughput, footprint, overload, accounts: child,client (default both;
                                                 CARD_START_MODE per variant); cluster: the first one only
  --shapes LIST         BENCH_SHAPES             throughput: single,three (default both); cluster: the first one only
  --run-shapes LIST     BENCH_RUN_SHAPES         throughput, steady: card,batch (default both; CARD_RUN_SHAPE per variant,
                                                 CARD_BATCH_SIZE from the environment)
  --accounts LIST       BENCH_ACCOUNTS           accounts: fleet sizes, comma-separated (default 100,1000)
  --scheduler-loops LIST BENCH_SCHEDULER_LOOPS   accounts, burst, sweep: workflow,activity (default both; SCHEDULER_LOOP per variant;
                                                 activity loops start their runs themselves: one start mode)
  --rounds N            BENCH_ROUNDS             throughput: runs of each variant, alternating (default 1);
                                                 cluster: rounds of dev, cluster, cluster, dev (default 1)
  --allow-busy          BENCH_ALLOW_BUSY=1       run on a busy machine anyway (results marked invalid)
  --keep-temporal-db    BENCH_KEEP_TEMPORAL_DB=1 run every scenario on one Temporal database (default: the dev server
                                                 the bench started is restarted on a fresh database before each timed
                                                 scenario after the first: it slows as its SQLite file grows)
  --out DIR             BENCH_OUT_DIR            results folder (default bench/results)
  --help

Before anything starts, the machine is sampled for 3 s: a 1-minute load average or other processes'
CPU above the limits refuses the run (exit code 3) unless --allow-busy is given or every chosen
scenario only counts (footprint); it is sampled again
every 5 s during the run. Results: <out>/<scenario>.json and .md, each with "valid" and the reasons
when not; the Markdown summaries are printed at the end.
Services (Temporal dev server, Redis, PostgreSQL) are started when not running.`;

export function flagValue(argv: readonly string[], name: string): string | undefined {
  const index = argv.findIndex((arg) => arg === name || arg.startsWith(`${name}=`));
  if (index < 0) return undefined;
  const arg = argv[index]!;
  if (arg.includes('=')) return arg.slice(arg.indexOf('=') + 1);
  const value = argv[index + 1];
  if (value === undefined || value.startsWith('--')) throw new Error(`${name} needs a value`);
  return value;
}

export function positive(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`);
  return value;
}

/** A boolean flag, or its variable set to 1/true. */
export function flagSet(argv: readonly string[], name: string, envValue: string | undefined): boolean {
  return argv.includes(name) || envValue === '1' || envValue === 'true';
}

/** Comma-separated members of `allowed`, in the order given, without duplicates. */
function listOf<T extends string>(name: string, raw: string, allowed: readonly T[]): T[] {
  const out: T[] = [];
  for (const item of raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')) {
    if (!(allowed as readonly string[]).includes(item)) throw new Error(`${name}: unknown value "${item}" (one of ${allowed.join(', ')})`);
    if (!out.includes(item as T)) out.push(item as T);
  }
  return out;
}

/** Flags every bench entry point accepts, and those that take a value. */
export const VALUE_FLAGS = [
  '--scenario',
  '--warmup',
  '--duration',
  '--steady-duration',
  '--overload-duration',
  '--cards',
  '--import',
  '--request-rate',
  '--start-modes',
  '--shapes',
  '--run-shapes',
  '--rounds',
  '--accounts',
  '--scheduler-loops',
  '--out',
];
const KNOWN_FLAGS = [...VALUE_FLAGS, '--allow-busy', '--keep-temporal-db', '--help', '-h'];

export function rejectUnknownFlags(argv: readonly string[], known: readonly string[]): void {
  // Unknown flags are errors: a typo must not silently run the long default.
  for (const arg of argv) {
    if (arg.startsWith('-') && !known.includes(arg.split('=')[0]!)) throw new Error(`unknown option ${arg}`);
  }
}

/** Comma-separated positive integers. */
function countsOf(name: string, raw: string): number[] {
  const counts = raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((s) => {
      const n = Number(s);
      if (!Number.isInteger(n) || n <= 0) throw new Error(`${name}: "${s}" is not a positive whole number`);
      return n;
    });
  if (counts.length === 0) throw new Error(`${name} needs at least one number`);
  return counts;
}

export function parseOptions(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): BenchOptions {
  rejectUnknownFlags(argv, KNOWN_FLAGS);
  const help = argv.includes('--help') || argv.includes('-h');
  const selected = listOf('--scenario', flagValue(argv, '--scenario') ?? env.BENCH_SCENARIO ?? '', SCENARIOS);
  // Canonical order whatever the command line says: capacity is measured before it is used.
  const scenarios = selected.length > 0 ? SCENARIOS.filter((name) => selected.includes(name)) : SCENARIOS.filter((name) => !OPT_IN.has(name));
  // Redis by default: the lifecycle path imports ~5 000 cards/s here, over three minutes for a million.
  const importMode = flagValue(argv, '--import') ?? env.BENCH_IMPORT ?? 'redis';
  if (importMode !== 'lifecycle' && importMode !== 'redis') throw new Error(`--import must be lifecycle or redis, got "${importMode}"`);
  const startModes = listOf('--start-modes', flagValue(argv, '--start-modes') ?? env.BENCH_START_MODES ?? START_MODES.join(','), START_MODES);
  const shapes = listOf('--shapes', flagValue(argv, '--shapes') ?? env.BENCH_SHAPES ?? SHAPES.join(','), SHAPES);
  if (startModes.length === 0) throw new Error('--start-modes needs at least one of child, client');
  if (shapes.length === 0) throw new Error('--shapes needs at least one of single, three');
  const runShapes = listOf('--run-shapes', flagValue(argv, '--run-shapes') ?? env.BENCH_RUN_SHAPES ?? RUN_SHAPES.join(','), RUN_SHAPES);
  if (runShapes.length === 0) throw new Error('--run-shapes needs at least one of card, batch');
  const schedulerLoops = listOf(
    '--scheduler-loops',
    flagValue(argv, '--scheduler-loops') ?? env.BENCH_SCHEDULER_LOOPS ?? SCHEDULER_LOOPS.join(','),
    SCHEDULER_LOOPS,
  );
  if (schedulerLoops.length === 0) throw new Error('--scheduler-loops needs at least one of workflow, activity');
  return {
    scenarios,
    schedulerLoops,
    warmupSec: positive('--warmup', flagValue(argv, '--warmup') ?? env.BENCH_WARMUP_SEC),
    durationSec: positive('--duration', flagValue(argv, '--duration') ?? env.BENCH_DURATION_SEC),
    steadyDurationSec: positive('--steady-duration', flagValue(argv, '--steady-duration') ?? env.BENCH_STEADY_DURATION_SEC),
    overloadDurationSec: positive('--overload-duration', flagValue(argv, '--overload-duration') ?? env.BENCH_OVERLOAD_DURATION_SEC),
    cards: Math.floor(positive('--cards', flagValue(argv, '--cards') ?? env.BENCH_CARDS) ?? 1_000_000),
    importMode,
    requestRate: positive('--request-rate', flagValue(argv, '--request-rate') ?? env.BENCH_REQUEST_RATE) ?? 1,
    startModes,
    shapes,
    runShapes,
    rounds: Math.floor(positive('--rounds', flagValue(argv, '--rounds') ?? env.BENCH_ROUNDS) ?? 1),
    accountCounts: countsOf('--accounts', flagValue(argv, '--accounts') ?? env.BENCH_ACCOUNTS ?? '100,1000'),
    allowBusy: flagSet(argv, '--allow-busy', env.BENCH_ALLOW_BUSY),
    keepTemporalDb: flagSet(argv, '--keep-temporal-db', env.BENCH_KEEP_TEMPORAL_DB),
    outDir: flagValue(argv, '--out') ?? env.BENCH_OUT_DIR ?? RESULTS_DIR,
    help,
  };
}
