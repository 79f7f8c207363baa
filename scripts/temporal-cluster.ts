/**
 * `npm run temporal:cluster -- <up|down|status|build>`: the multi-service Temporal server on
 * PostgreSQL (devstack/temporalCluster.ts), next to the dev server.
 */
import { loadConfigOrExit } from '../src/config/index.js';
import {
  binariesBuilt,
  clusterOptions,
  DEFAULT_CLUSTER_FRONTEND_PORT,
  ensureServerBinaries,
  frontendAddress,
  serviceLogFile,
  temporalClusterDown,
  temporalClusterStatus,
  temporalClusterUp,
  TEMPORAL_SERVER_VERSION,
  type ClusterOptionOverrides,
} from '../devstack/temporalCluster.js';

const HELP = `usage: npm run temporal:cluster -- <up|down|status|build> [--port N] [--log-level L]

  up      build the binaries when missing (minutes, once per version), create the databases
          temporal and temporal_visibility on DATABASE_URL's PostgreSQL and migrate them, start
          frontend, history, matching and worker as separate processes (those not running),
          create the namespace (TEMPORAL_NAMESPACE) and register the search attributes.
          Idempotent: a killed service is started again.
  down    stop the four processes (the databases are kept)
  status  pid and port of each service (exit status 3 when one is not running)
  build   only build the binaries (go install go.temporal.io/server/...@${TEMPORAL_SERVER_VERSION})

  --port N        frontend gRPC port (default ${DEFAULT_CLUSTER_FRONTEND_PORT}; the dev server keeps 7233).
                  history, matching, worker use N+1..N+3, membership ports N-1000..N-997,
                  frontend HTTP N+10, Prometheus metrics N+20..N+23. Choose it before the first
                  up: the databases record the frontend address (cluster metadata).
  --log-level L   server log level: debug, info, warn (default), error

Binaries: ~/.cache/card-poller/temporal-server/<version>/ (XDG_CACHE_HOME respected).
Config, pid files, logs: <DATA_DIR>/temporal-cluster/.
Point the project at it with TEMPORAL_ADDRESS=127.0.0.1:<port>.`;

const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;

function parseFlags(flags: readonly string[]): ClusterOptionOverrides {
  let frontendPort: number | undefined;
  let logLevel: (typeof LOG_LEVELS)[number] | undefined;
  for (let i = 0; i < flags.length; i++) {
    const flag = flags[i];
    const value = flags[i + 1];
    if (flag === '--port' && value !== undefined) {
      frontendPort = Number(value);
      if (!Number.isInteger(frontendPort) || frontendPort < 1001 || frontendPort > 65_500)
        throw new Error(`--port: expected an integer in 1001..65500, got "${value}"`);
      i++;
    } else if (flag === '--log-level' && value !== undefined) {
      const level = LOG_LEVELS.find((l) => l === value);
      if (level === undefined) throw new Error(`--log-level: expected one of ${LOG_LEVELS.join(', ')}, got "${value}"`);
      logLevel = level;
      i++;
    } else {
      throw new Error(`unknown or incomplete option "${flag}"`);
    }
  }
  return { ...(frontendPort === undefined ? {} : { frontendPort }), ...(logLevel === undefined ? {} : { logLevel }) };
}

async function main(): Promise<void> {
  const [command, ...flags] = process.argv.slice(2);
  if (command === undefined || command === '--help' || command === '-h' || flags.includes('--help')) {
    process.stdout.write(`${HELP}\n`);
    return;
  }
  const config = loadConfigOrExit();
  let overrides: ClusterOptionOverrides;
  try {
    overrides = parseFlags(flags);
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${HELP}\n`);
    process.exitCode = 2;
    return;
  }
  const options = clusterOptions(config, overrides);
  const log = (line: string): void => void process.stdout.write(`[temporal-cluster] ${line}\n`);
  const started = Date.now();
  if (command === 'up') {
    if (!binariesBuilt(options)) log(`Temporal server ${options.version} is not built yet: building it first takes several minutes`);
    const result = await temporalClusterUp(options, log);
    for (const [service, how] of Object.entries(result.services)) log(`${service}: ${how}`);
    if (result.createdDatabases.length > 0) log(`created databases: ${result.createdDatabases.join(', ')}`);
    log(
      `phases (ms): ${Object.entries(result.timings)
        .map(([name, ms]) => `${name} ${ms}`)
        .join(', ')}`,
    );
    log(`up in ${Date.now() - started} ms; frontend ${result.address} (TEMPORAL_ADDRESS=${result.address})`);
  } else if (command === 'down') {
    const stopped = await temporalClusterDown(options);
    for (const [service, was] of Object.entries(stopped)) log(`${service}: ${was ? 'stopped' : 'not running'}`);
  } else if (command === 'status') {
    const statuses = await temporalClusterStatus(options);
    log(
      `Temporal server ${options.version}, binaries ${binariesBuilt(options) ? 'built' : 'not built'} in ` +
        `${options.binDir}; frontend ${frontendAddress(options)}`,
    );
    for (const s of statuses) {
      log(
        `${s.service.padEnd(8)} ${s.pid === undefined ? 'not running' : `pid ${s.pid}`}, port ${s.grpcPort} ` +
          `${s.listening ? 'listening' : 'closed'}; log ${serviceLogFile(options, s.service)}`,
      );
    }
    if (statuses.some((s) => s.pid === undefined)) process.exitCode = 3;
  } else if (command === 'build') {
    const binaries = await ensureServerBinaries(options, log);
    log(
      binaries.builtInMs === undefined
        ? `already built: ${binaries.server}, ${binaries.sqlTool}`
        : `built in ${binaries.builtInMs} ms: ${binaries.server}, ${binaries.sqlTool}`,
    );
  } else {
    process.stderr.write(`unknown command "${command}"\n${HELP}\n`);
    process.exitCode = 2;
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`[temporal-cluster] ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
