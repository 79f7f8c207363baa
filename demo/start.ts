/**
 * `npm start`: the main job on embedded defaults. Brings up (or reuses) Temporal with its Web UI,
 * Redis and PostgreSQL, migrates, starts the gateway simulator in a process of its own (it stands
 * in for the carriers, and measures the calls on its own clock), the workers of every task queue
 * and the API in this process, loads the demo into an empty database, starts pollingControl, then
 * prints a live line every few seconds. Ctrl-C stops everything started here (the services keep
 * running; `npm run services:down` stops them).
 */
import { Client, Connection } from '@temporalio/client';
import { loadConfigOrExit, taskQueues } from '../src/config/index.js';
import { servicesUp } from '../devstack/index.js';
import { createPool } from '../src/db/pool.js';
import { migrate } from '../src/db/migrate.js';
import { startSimulatorProcess, type SimulatorProcess } from '../src/simulator/childProcess.js';
import { startWorkers } from '../src/workers/run.js';
import { WORKER_KINDS } from '../src/workers/createWorker.js';
import { createPollingServices } from '../src/app/pollingServices.js';
import { createRuntimeDeps } from '../src/runtime/deps.js';
import { currentSchedulerStatus, ensurePollingControl } from '../src/app/temporalControl.js';
import { cardRunsQuery } from '../src/workflow-safe/searchAttributes.js';
import type { SchedulerStatus } from '../src/workflow-safe/loopStatus.js';
import { DEMO_RUN_SHAPE, configureSimulator, loadDemoIfEmpty } from './demo.js';
import { startLiveLine } from './liveLine.js';
import { createCpuMeter, pidFromFile } from './cpuMeter.js';
import { dataDir } from '../devstack/paths.js';
import { join } from 'node:path';
import { startApiServer } from '../src/api/start.js';
import { rebuild, RebuildLockedError } from '../src/lifecycle/rebuild.js';
import { stopInOrder } from '../src/runtime/stopInOrder.js';

const HELP = `usage: npm start

Starts Temporal (dev server + Web UI), Redis, PostgreSQL, the gateway simulator, all workers and the
API on 127.0.0.1, loads demo data into an empty database and prints a live line. Configuration comes
from the environment (see README.md); TEMPORAL_ADDRESS / REDIS_URL / DATABASE_URL / GATEWAY_URL set
to external services are used as they are and nothing is started for them.`;

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  process.stdout.write(`${HELP}\n`);
  process.exit(0);
}

const log = (line: string): void => void process.stdout.write(`${line}\n`);
// The demo runs its cards in the batched shape unless told otherwise: one workflow per card would
// need most of a slow 2-core machine for the demo's ~20 checks/s (docs/capacity.md), while batches
// carry them in a few workflows a second and leave the machine mostly idle. CARD_RUN_SHAPE=card
// shows the per-card shape (workflow id `card-<id>`).
const loaded = loadConfigOrExit({ CARD_RUN_SHAPE: DEMO_RUN_SHAPE, ...process.env });
// The live line is the console's main content: keep API and SDK chatter out unless asked for.
const config = (process.env.LOG_LEVEL ?? '') === '' ? { ...loaded, LOG_LEVEL: 'error' as const } : loaded;
const started = Date.now();
const addresses = await servicesUp(config, { redisPersistence: 'aof', log: (line) => log(`[services] ${line}`) });

const pool = createPool({ url: config.DATABASE_URL, schema: config.DATABASE_SCHEMA, max: 2 });
const migrated = await migrate(pool, config.DATABASE_SCHEMA);
log(`[migrate] schema ${config.DATABASE_SCHEMA} at migration ${migrated.current}`);
await pool.end();

let simulator: SimulatorProcess | undefined;
if ((process.env.GATEWAY_URL ?? '') === '') {
  simulator = await startSimulatorProcess({ host: config.SIMULATOR_HOST, port: config.SIMULATOR_PORT, seed: 1, logLevel: config.LOG_LEVEL });
  await configureSimulator(simulator);
  log(`[simulator] gateway simulator on ${simulator.url}`);
}
// The workers call the simulator started here, wherever SIMULATOR_PORT put it (GATEWAY_URL's
// default names the default port only).
const runConfig = simulator ? { ...config, GATEWAY_URL: simulator.url } : config;

// Redis is made intact (rebuilt from PostgreSQL when it lacks its rebuild marker, e.g. a fresh one)
// before any worker runs. Otherwise pollingControl's Redis guard, on the control worker, rebuilds
// it while the demo loads: the rebuild read a card's first due times and wrote them back over the
// demo's spread ones (a fresh clone, 2026-12-07: the guard's rebuild ran during demo-mobile's load,
// every one of its cards came due within a tenth of each interval — 1 000 realname checks in
// 10 minutes instead of ~350 — and its lateness p99 grew to 295 s, the other accounts under 1.5 s).
{
  const guardDeps = await createRuntimeDeps(runConfig, { name: 'redis-guard', poolSize: 2 });
  try {
    await createPollingServices({ deps: guardDeps }).redisGuard.ensureIntact();
  } finally {
    await guardDeps.close();
  }
}

const workers = await startWorkers(runConfig, WORKER_KINDS);
log(`[workers] ${WORKER_KINDS.join(', ')} running`);
const services = createPollingServices({ deps: workers.deps });
// After the workers: the demo's first dues start now, not before the workers can claim them.
const demoCards = await loadDemoIfEmpty(workers.deps.pool, services.lifecycle, workers.deps.store, (line) => log(`[demo] ${line}`));
if (demoCards > 0) log(`[demo] loaded ${demoCards} cards`);
// Redis may have lost data while we were down (it is rebuildable from PostgreSQL by design):
// reconcile it once at start. Idempotent; due times that still exist are kept.
try {
  const rebuilt = await rebuild({ pool: workers.deps.pool, redis: workers.deps.redis, store: workers.deps.store, namespace: config.REDIS_KEY_PREFIX });
  log(
    rebuilt.skipped
      ? `[rebuild] skipped (${rebuilt.skipped})`
      : `[rebuild] ${rebuilt.upserted} cards in ${rebuilt.carriers} accounts ` +
          `(${rebuilt.keptDues} due times kept, ${rebuilt.newDues} new) in ${rebuilt.durationMs} ms`,
  );
} catch (error) {
  // pollingControl (kept running by the control worker) may be rebuilding a Redis it found empty: that one does the job.
  if (!(error instanceof RebuildLockedError)) throw error;
  log('[rebuild] already running (pollingControl found Redis without its rebuild marker)');
}

const connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS });
const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
const ref = { client, taskQueues: taskQueues(config), workflowIdPrefix: config.WORKFLOW_ID_PREFIX };
await ensurePollingControl(ref);
const api = await startApiServer(runConfig, workers.deps, services, ref);

log('');
log(`ready in ${Date.now() - started} ms`);
log(`  Temporal gRPC     ${addresses.temporal}`);
log(`  Temporal Web UI   ${addresses.temporalUi}/namespaces/${config.TEMPORAL_NAMESPACE}/workflows`);
// The query for the run shape in use: cardCheck runs carry CardId, cardBatch runs list theirs in CardIds.
const oneCardQuery = cardRunsQuery('1', config.CARD_RUN_SHAPE);
log(
  `  one card's runs   ` +
    `${addresses.temporalUi}/namespaces/${config.TEMPORAL_NAMESPACE}/workflows?query=${encodeURIComponent(oneCardQuery)} ` +
    `  (query: ${oneCardQuery}; CARD_RUN_SHAPE=${config.CARD_RUN_SHAPE})`,
);
log(`  Redis             ${addresses.redis}`);
log(`  PostgreSQL        ${addresses.postgres}`);
if (simulator) log(`  simulator         ${simulator.url}/sim/stats`);
{
  log(`  API               ${api.url}   (Authorization: Bearer ${config.API_TOKEN})`);
  log(`  API docs          ${api.url}/docs   (JSON at /docs/json)`);
  log(`  dashboard         ${api.url}/dashboard   (asks for the API token once)`);
}
log('Ctrl-C stops.\n');

const scheduler = (carrierId: string): Promise<SchedulerStatus | undefined> =>
  currentSchedulerStatus(ref, workers.deps.store, carrierId).catch(() => undefined);
// The processes a check costs CPU in (PostgreSQL and Redis are left out: a few % of it).
const temporalPid = pidFromFile(join(dataDir(config.DATA_DIR), 'temporal', 'server.pid'));
const cpu = createCpuMeter([
  { label: 'workers+api', pid: process.pid },
  ...(temporalPid === undefined ? [] : [{ label: 'temporal', pid: temporalPid }]),
  ...(simulator ? [{ label: 'simulator', pid: simulator.pid }] : []),
]);
const live = startLiveLine({ pool: workers.deps.pool, store: workers.deps.store, simulator, scheduler, log, cpu });

/**
 * One stop step's limit: above the workers' (their grace plus the SDK's forced shutdown,
 * src/workers/createWorker.ts). A step past it is named, and the process exits all the same.
 */
const STOP_STEP_LIMIT_MS = config.WORKER_SHUTDOWN_GRACE_MS + 30_000;
let stopping = false;
const stop = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  log('\nstopping…');
  const outcome = await stopInOrder(
    [
      { name: 'the live line', run: () => live.stop() },
      { name: 'the API', run: () => api.close() },
      { name: 'the workers', run: () => workers.shutdown() },
      { name: 'the Temporal client', run: () => connection.close() },
      { name: 'the simulator', run: async () => simulator?.close() },
    ],
    { stepLimitMs: STOP_STEP_LIMIT_MS, log },
  );
  if (outcome.kind === 'stuck') {
    log(`exiting without a clean stop (${outcome.step} did not stop)`);
    process.exit(1);
  }
  log('stopped (services keep running; `npm run services:down` stops them)');
  process.exit(0);
};
// `on`, not `once`: a Ctrl-C at a terminal reaches this process more than once (directly, and
// relayed by npm and tsx), and a second SIGINT with no listener left would kill it mid-stop.
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
