/**
 * cluster (README.md, 'Cluster setup'): what the distributed setup costs against the single-process
 * one, in one run.
 *
 * 1. The throughput workload (bench/scenarios/throughputLoad.ts, through measureCardExecutions)
 *    against the Temporal dev server and against the local Temporal cluster (four service
 *    processes on PostgreSQL, devstack/temporalCluster.ts), in ABBA order per round (dev,
 *    cluster, cluster, dev) so a machine drifting during the run weighs on both alike. "Temporal"
 *    CPU is the server the stack talks to: the dev server's process, or the cluster's four.
 * 2. Claim rounds on Redis Cluster vs single Redis (bench/lib/claimRounds.ts).
 *
 * Brings the Temporal cluster up when it is not running (and stops it again afterwards when it
 * started all of it), and the local Redis Cluster unless REDIS_CLUSTER_NODES names another one.
 */
import os from 'node:os';
import { windowSeconds, type Scenario, type ScenarioContext } from '../lib/context.js';
import { measureCardExecutions, startModeCheck, type CardRunResult } from '../lib/cardExecutions.js';
import {
  claimExplain,
  claimTables,
  compareClaimRounds,
  DEFAULT_CLAIM_ACCOUNTS,
  DEFAULT_CLAIM_CARDS,
  ensureRedisCluster,
  redisClusterPids,
} from '../lib/claimRounds.js';
import { driveProcesses } from '../lib/machineLoad.js';
import { temporalClusterPids, usesTemporalCluster } from '../lib/processes.js';
import { cpuNote } from '../lib/window.js';
import { round } from '../lib/stats.js';
import type { Table } from '../lib/report.js';
import {
  binariesBuilt,
  CLUSTER_SERVICES,
  clusterOptions,
  frontendAddress,
  temporalClusterDown,
  temporalClusterStatus,
  temporalClusterUp,
  TEMPORAL_SERVER_VERSION,
  type TemporalClusterOptions,
} from '../../devstack/temporalCluster.js';
import { THROUGHPUT_CONFIG, typesPerExecution } from './throughputLoad.js';

type Target = 'dev' | 'cluster';
const TARGET_NAME: Record<Target, string> = { dev: 'dev server', cluster: 'Temporal cluster' };
/** Each round: dev, cluster, cluster, dev — a linear drift adds the same to both targets. */
const ROUND_ORDER: readonly Target[] = ['dev', 'cluster', 'cluster', 'dev'];

interface TargetRun extends CardRunResult {
  readonly target: Target;
  readonly round: number;
  readonly address: string;
  /** Why the figures of this run may be disturbed (a cluster service restarted during it). */
  readonly disturbed?: string;
  /** Why the first attempt was discarded, when this run is the second. */
  readonly retriedAfter?: string;
}

const mean = (values: readonly number[]): number => (values.length > 0 ? values.reduce((a, b) => a + b, 0) / values.length : 0);

/** Fails before anything runs when the binaries are missing: building them is a separate, long step. */
function requireBinaries(options: TemporalClusterOptions): void {
  if (binariesBuilt(options)) return;
  throw new Error(
    `The Temporal cluster's binaries (Temporal server ${TEMPORAL_SERVER_VERSION}) are not built in ${options.binDir}. ` +
      'Build them first with `npm run temporal:cluster -- build` (go install of go.temporal.io/server, needs Go on PATH; ' +
      'it takes several minutes, once per version: the binaries are cached in that folder), then run `npm run bench -- --scenario cluster` again.',
  );
}

/** Up (idempotent: what runs is reused); whether this call started every service. */
async function clusterUp(options: TemporalClusterOptions, log: (line: string) => void): Promise<boolean> {
  const up = await temporalClusterUp(options, (line) => log(`temporal cluster: ${line}`));
  const started = CLUSTER_SERVICES.filter((service) => up.services[service] === 'started');
  log(
    `Temporal cluster at ${up.address}: ${started.length === 0 ? 'running, reused' : `started ${started.join(', ')}`} (${Object.entries(up.timings)
      .map(([phase, ms]) => `${phase} ${ms} ms`)
      .join(', ')})`,
  );
  return started.length === CLUSTER_SERVICES.length;
}

async function measureTarget(context: ScenarioContext, target: Target, address: string, round: number, label: string): Promise<TargetRun> {
  const seconds = windowSeconds(context, { warmupSec: 20, durationSec: 45 });
  const spec = { startMode: context.options.startModes[0] ?? 'child', shape: context.options.shapes[0] ?? 'single', ...seconds };
  // The stack's Temporal address decides the server: every connection of its workers and client uses it.
  const targeted: ScenarioContext = { ...context, config: { ...context.config, TEMPORAL_ADDRESS: address } };
  const pidsBefore = target === 'cluster' ? temporalClusterPids(context.config).join(',') : '';
  const run = await measureCardExecutions(targeted, spec, label);
  const pidsAfter = target === 'cluster' ? temporalClusterPids(context.config).join(',') : '';
  const disturbed =
    pidsBefore !== pidsAfter
      ? `cluster service pids changed during the run (${pidsBefore || 'none'} → ${pidsAfter || 'none'}): a service ` +
        `stopped or restarted, the window lost part of its work and CPU`
      : undefined;
  return { ...run, target, round, address, ...(disturbed ? { disturbed } : {}) };
}

/** One measurement; a run on the cluster that fails or sees a restart is tried once more after `up`. */
async function measureWithRetry(context: ScenarioContext, target: Target, options: TemporalClusterOptions, round: number, label: string): Promise<TargetRun> {
  const address = target === 'dev' ? context.config.TEMPORAL_ADDRESS : frontendAddress(options);
  if (target === 'dev') return measureTarget(context, target, address, round, label);
  // A service another user stopped since the last run is started again first (about a second when all run).
  await clusterUp(options, context.log);
  let reason: string;
  try {
    const run = await measureTarget(context, target, address, round, label);
    if (run.disturbed === undefined) return run;
    reason = run.disturbed;
  } catch (error) {
    // Another user's cluster test kills and restarts services: one more try on a healthy cluster.
    reason = `failed: ${error instanceof Error ? error.message : String(error)}`;
  }
  context.log(`${label}: ${reason}; bringing the cluster up and measuring again`);
  await clusterUp(options, context.log);
  return { ...(await measureTarget(context, target, address, round, `${label} (retry)`)), retriedAfter: reason };
}

function summaryTable(runs: readonly TargetRun[]): Table {
  const of = (target: Target): TargetRun[] => runs.filter((run) => run.target === target);
  const figures = (list: readonly TargetRun[]): number[] => {
    const c = (pick: (run: TargetRun) => number): number => round(mean(list.map(pick)), 2);
    return [
      round(mean(list.map((run) => run.executionsPerSecond)), 1),
      c((run) => run.history.events.mean),
      c((run) => run.history.workflowTasks.mean),
      c((run) => run.cost.cpuMsPerExecution.temporal),
      // The dev server keeps its store in its process; what the Temporal databases did meanwhile is not its cost.
      c((run) => run.cost.cpuMsPerExecution.temporal + (run.target === 'cluster' ? run.cost.cpuMsPerExecution.temporalStore : 0)),
      c((run) => run.cost.cpuMsPerExecution.bench + run.cost.cpuMsPerExecution.simulator),
      c((run) => run.cost.cpuMsPerExecution.postgres),
    ];
  };
  const dev = figures(of('dev'));
  const cluster = figures(of('cluster'));
  const ratio = cluster.map((value, i) => (dev[i]! > 0 ? round(value / dev[i]!, 2) : '–'));
  return {
    headers: [
      'Temporal',
      'runs',
      'executions/s',
      'ratio to dev server',
      'events / exec',
      'workflow tasks / exec',
      'Temporal CPU ms / exec',
      'Temporal + its PostgreSQL CPU ms / exec',
      'our CPU ms / exec (workers + sim)',
      'PostgreSQL CPU ms / exec (all)',
    ],
    numeric: [false, true, true, true, true, true, true, true, true, true],
    rows: [
      [`${TARGET_NAME.dev} (mean)`, of('dev').length, dev[0]!, 1, ...dev.slice(1)],
      [`${TARGET_NAME.cluster} (mean)`, of('cluster').length, cluster[0]!, ratio[0]!, ...cluster.slice(1)],
      ['cluster ÷ dev server', '', ratio[0]!, '', ...ratio.slice(1)],
    ],
  };
}

function runsTable(runs: readonly TargetRun[]): Table {
  return {
    headers: [
      'round',
      'Temporal',
      'address',
      'executions/s',
      'events / exec',
      'workflow tasks / exec',
      'child runs',
      'Temporal CPU ms / exec',
      "Temporal databases' PostgreSQL CPU ms / exec",
      'our CPU ms / exec',
      'PostgreSQL CPU ms / exec',
      'Redis CPU ms / exec',
      'limited by',
    ],
    numeric: [true, false, false, true, true, true, false, true, true, true, true, true, false],
    rows: runs.map((run) => {
      const c = run.cost.cpuMsPerExecution;
      return [
        run.round,
        `${TARGET_NAME[run.target]}${run.disturbed ? ' (disturbed)' : ''}`,
        run.address,
        run.executionsPerSecond,
        run.history.events.mean,
        run.history.workflowTasks.mean,
        `${run.history.withParent}/${run.history.sampled}`,
        c.temporal,
        c.temporalStore,
        round(c.bench + c.simulator, 2),
        c.postgres,
        c.redis,
        [...new Set(run.schedulers.map((s) => s.limitedBy))].join(', ') || '-',
      ];
    }),
  };
}

export const cluster: Scenario = async (context) => {
  const options = clusterOptions(context.config);
  requireBinaries(options);
  if (usesTemporalCluster(context.config))
    throw new Error(
      `TEMPORAL_ADDRESS=${context.config.TEMPORAL_ADDRESS} is the Temporal cluster: the scenario compares it with ` +
        `the dev server, unset TEMPORAL_ADDRESS (or point it at the dev server)`,
    );
  const wasRunning = (await temporalClusterStatus(options)).every((service) => service.pid !== undefined && service.listening);
  const startedAll = await clusterUp(options, context.log);
  await ensureRedisCluster(context.config, context.log);
  // The cluster's processes serve this run: they are ours in the load monitor while it lasts.
  const undrive = driveProcesses(() => [...temporalClusterPids(context.config), ...redisClusterPids(context.config)]);
  const seconds = windowSeconds(context, { warmupSec: 20, durationSec: 45 });
  const runs: TargetRun[] = [];
  try {
    const plan = Array.from({ length: context.options.rounds }, (_, i) => ROUND_ORDER.map((target) => ({ round: i + 1, target }))).flat();
    for (const [index, step] of plan.entries()) {
      const label = `${TARGET_NAME[step.target]} (${index + 1}/${plan.length})`;
      const run = await measureWithRetry(context, step.target, options, step.round, label);
      // The dev server's runs are this invocation's capacity figures too; the cluster's are not.
      if (step.target === 'dev') context.measured.cardRuns.push({ ...run, source: `cluster round ${step.round} (dev server)` });
      runs.push(run);
      context.log(
        `${label}: ${run.executionsPerSecond} executions/s, ${run.history.events.mean} events, ` +
          `${run.history.workflowTasks.mean} workflow tasks, Temporal CPU ${run.cost.cpuMsPerExecution.temporal} ms per ` +
          `execution`,
      );
    }
    const claims = await compareClaimRounds(context.config, { cards: DEFAULT_CLAIM_CARDS, accounts: DEFAULT_CLAIM_ACCOUNTS }, context.log);
    const first = runs[0]!;
    const devRate = mean(runs.filter((run) => run.target === 'dev').map((run) => run.executionsPerSecond));
    const clusterRate = mean(runs.filter((run) => run.target === 'cluster').map((run) => run.executionsPerSecond));
    const ratio = devRate > 0 ? round(clusterRate / devRate, 2) : null;
    const cores = os.cpus().length;
    const warnings = runs.flatMap((run) => {
      const problem = startModeCheck(run);
      const name = `Round ${run.round} ${TARGET_NAME[run.target]}`;
      return [
        ...(problem ? [`${name}: ${problem}.`] : []),
        ...(run.retriedAfter ? [`${name}: measured twice, the first attempt discarded (${run.retriedAfter}).`] : []),
        ...(run.disturbed ? [`${name}: ${run.disturbed}.`] : []),
      ];
    });
    return {
      title: 'the distributed setup against the single-process one: Temporal cluster vs dev server, Redis Cluster vs single Redis',
      explain: [
        `Temporal: the throughput workload (${THROUGHPUT_CONFIG.accounts} accounts × ` +
          `${THROUGHPUT_CONFIG.cardsPerAccount} cards due every ${THROUGHPUT_CONFIG.intervalSec} s, budget ` +
          `${THROUGHPUT_CONFIG.qps} QPS, gateway latency p50 ${THROUGHPUT_CONFIG.latencyMs.p50} ms; ` +
          `${first.startMode} starts, ${typesPerExecution(first.shape)} type(s) per execution) through a fresh stack per ` +
          `run, against the dev server (${context.config.TEMPORAL_ADDRESS}, one process, SQLite) and the Temporal cluster ` +
          `(${frontendAddress(options)}, ${TEMPORAL_SERVER_VERSION}, frontend + history + matching + worker as four ` +
          `processes, ${options.numHistoryShards} history shards, persistence and visibility on the project's PostgreSQL). ` +
          `Runs in the order ${ROUND_ORDER.map((target) => TARGET_NAME[target]).join(', ')} per round ` +
          `(${context.options.rounds} round(s)); figures are means over each target's runs.`,
        "Temporal CPU: the dev server's process, or the cluster's four service processes (pids from its pid files). " +
          '"Its PostgreSQL": the backends connected to the cluster\'s databases (temporal, temporal_visibility) — ' +
          'the cluster\'s persistence, which the dev server does in its own process; also counted in "PostgreSQL (all)", ' +
          'which includes the card_execution records of both. ' +
          'On dev-server runs that column is what the idle cluster (and its other users) did meanwhile, not added to the ' +
          "dev server. Our CPU: this process (four workers, bench) plus the simulator's process. " +
          'Events and workflow tasks per execution: fetchHistory of up to 20 completed runs of each window.',
        claimExplain(claims),
      ],
      config: {
        ...seconds,
        rounds: context.options.rounds,
        order: ROUND_ORDER.join(','),
        startMode: first.startMode,
        shape: first.shape,
        devServer: context.config.TEMPORAL_ADDRESS,
        temporalCluster: frontendAddress(options),
        temporalServerVersion: TEMPORAL_SERVER_VERSION,
        historyShards: options.numHistoryShards,
        claimCards: DEFAULT_CLAIM_CARDS,
        claimAccounts: DEFAULT_CLAIM_ACCOUNTS,
        ...THROUGHPUT_CONFIG,
        ...first.settings,
      },
      results: {
        temporal: { ratio, devExecutionsPerSecond: round(devRate, 1), clusterExecutionsPerSecond: round(clusterRate, 1), runs },
        redis: claims,
        temporalCluster: { wasRunning, startedByScenario: startedAll },
      },
      tables: [summaryTable(runs), runsTable(runs), ...claimTables(claims)],
      verdicts: [],
      notes: [
        `What the ratio (${ratio ?? '–'}) means: on this one ${cores}-core machine the cluster's four processes and ` +
          `the PostgreSQL holding its persistence compete with the workers, the simulator and the dev server's idle ` +
          `process for the same ${cores} cores — ` +
          'and every history write becomes SQL over a socket where the dev server writes SQLite in its own process. The ' +
          'cluster exists to scale across machines (history shards, matching and frontend spread out, PostgreSQL on its own hosts): ' +
          'one host says what the distribution costs per execution (CPU, events, tasks), not what a cluster can reach.',
        'The cluster stays up during the dev-server runs and the dev server during the cluster runs: each idles while ' +
          "the other works, and both idle costs are part of the machine's load in every window.",
        'Events and workflow tasks per execution come from the code and should match between the two servers; a ' +
          'difference is the server version, not the load.',
        `Redis: the local cluster's 3 masters and 3 replicas also share this machine's ${cores} cores, so a concurrent ` +
          `claim figure here is a lower bound of what spreading accounts over masters on separate hosts gives; the ` +
          `one-account figure is the per-round price of cluster routing (a round trip to the owning master).`,
        wasRunning
          ? 'The Temporal cluster was running before the scenario and was reused (its other users, e.g. the cluster tests, ' +
            'count as its load during the windows).'
          : `The scenario started the Temporal cluster${startedAll ? ' and stopped it at the end' : ' (partly; left running)'}.`,
        ...warnings,
        ...runs.map((run) => `Round ${run.round} ${TARGET_NAME[run.target]}: ${cpuNote(run.cpuShares)}`),
      ],
    };
  } finally {
    undrive();
    // Leave the machine as found: a cluster this scenario started would load the later scenarios.
    if (startedAll && !wasRunning)
      await temporalClusterDown(options).catch((error: unknown) =>
        context.log(`temporal cluster down: ${error instanceof Error ? error.message : String(error)}`),
      );
  }
};
