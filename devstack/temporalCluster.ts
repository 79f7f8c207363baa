/**
 * A real multi-service Temporal server on loopback (docs/design.md, 'Operating it': on a Temporal
 * cluster), next to the dev server: the server and its SQL schema tool built from the Go module
 * `go.temporal.io/server` (pinned), PostgreSQL persistence and visibility on the project's
 * PostgreSQL, 16 history shards, and frontend, history, matching and worker as four processes.
 * Binaries are cached by version outside the clone (a second clone reuses them); data, generated
 * config and logs live under `<DATA_DIR>/temporal-cluster/`.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, closeSync, readFileSync, renameSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { stringify } from 'yaml';
import type { Config } from '../src/config/index.js';
import { dataDir, userCacheDir } from './paths.js';
import { parseDatabaseUrl, type PostgresOptions } from './postgres.js';
import { execFileAsync, isAlive, isTcpOpen, readPid, spawnDetached, stopPidFile, waitUntil } from './process.js';
import { ensureTemporalCli, TEMPORAL_BIN } from './temporal.js';
import { SEARCH_ATTRIBUTES } from '../src/workflow-safe/searchAttributes.js';
import { logConnectionErrors } from '../src/runtime/connectionErrors.js';

/**
 * v1.32.1: the newest v1.32 patch that builds with this machine's Go (v1.32.2's go.mod asks for
 * go 1.26.10, and GOTOOLCHAIN=local refuses to fetch a toolchain).
 */
export const TEMPORAL_SERVER_VERSION = 'v1.32.1';
const GO_MODULE = 'go.temporal.io/server';

/** Started in this order: history owns the shards the others route to, frontend last but one. */
export const CLUSTER_SERVICES = ['history', 'matching', 'frontend', 'worker'] as const;
export type ClusterService = (typeof CLUSTER_SERVICES)[number];

/** gRPC port = frontend port + offset; membership = gRPC − 1000; metrics = frontend port + 20 + offset. */
const PORT_OFFSET: Readonly<Record<ClusterService, number>> = { frontend: 0, history: 1, matching: 2, worker: 3 };

export const DEFAULT_CLUSTER_FRONTEND_PORT = 7333;

export interface ServicePorts {
  readonly grpc: number;
  readonly membership: number;
  readonly metrics: number;
}

export interface TemporalClusterOptions {
  readonly version: string;
  /** Folder holding temporal-server and temporal-sql-tool for `version`. */
  readonly binDir: string;
  /** Generated config, pid files and logs. */
  readonly dir: string;
  readonly host: string;
  readonly frontendPort: number;
  readonly postgres: PostgresOptions;
  readonly databases: { readonly default: string; readonly visibility: string };
  readonly numHistoryShards: number;
  readonly namespace: string;
  readonly logLevel: 'debug' | 'info' | 'warn' | 'error';
}

export interface ClusterOptionOverrides {
  readonly frontendPort?: number;
  readonly logLevel?: TemporalClusterOptions['logLevel'];
  readonly version?: string;
}

/** `~/.cache/card-poller/temporal-server/<version>` (XDG_CACHE_HOME when set). */
export function binaryCacheDir(version: string, env: NodeJS.ProcessEnv = process.env): string {
  return join(userCacheDir(env), 'temporal-server', version);
}

export function clusterOptions(config: Config, overrides: ClusterOptionOverrides = {}): TemporalClusterOptions {
  const version = overrides.version ?? TEMPORAL_SERVER_VERSION;
  return {
    version,
    binDir: binaryCacheDir(version),
    dir: join(dataDir(config.DATA_DIR), 'temporal-cluster'),
    host: '127.0.0.1',
    frontendPort: overrides.frontendPort ?? DEFAULT_CLUSTER_FRONTEND_PORT,
    postgres: parseDatabaseUrl(config.DATABASE_URL),
    databases: { default: 'temporal', visibility: 'temporal_visibility' },
    numHistoryShards: 16,
    namespace: config.TEMPORAL_NAMESPACE,
    logLevel: overrides.logLevel ?? 'warn',
  };
}

export function servicePorts(options: TemporalClusterOptions, service: ClusterService): ServicePorts {
  const grpc = options.frontendPort + PORT_OFFSET[service];
  return { grpc, membership: grpc - 1000, metrics: options.frontendPort + 20 + PORT_OFFSET[service] };
}

export function frontendAddress(options: TemporalClusterOptions): string {
  return `${options.host}:${options.frontendPort}`;
}

function frontendHttpPort(options: TemporalClusterOptions): number {
  return options.frontendPort + 10;
}

export interface ServerBinaries {
  readonly server: string;
  readonly sqlTool: string;
}

function binaryPaths(binDir: string): ServerBinaries {
  return { server: join(binDir, 'temporal-server'), sqlTool: join(binDir, 'temporal-sql-tool') };
}

export function binariesBuilt(options: TemporalClusterOptions): boolean {
  const paths = binaryPaths(options.binDir);
  return existsSync(paths.server) && existsSync(paths.sqlTool);
}

/**
 * Builds the binaries with `go install` when the cache lacks them. The build goes to a private
 * folder renamed into place at the end, so a concurrent clone never runs a half-written binary.
 */
export async function ensureServerBinaries(options: TemporalClusterOptions, log: (line: string) => void): Promise<ServerBinaries & { builtInMs?: number }> {
  const paths = binaryPaths(options.binDir);
  if (binariesBuilt(options)) return paths;
  const staging = `${options.binDir}.building-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  const buildLog = join(staging, 'build.log');
  const packages = [`${GO_MODULE}/cmd/server@${options.version}`, `${GO_MODULE}/cmd/tools/sql@${options.version}`];
  log(
    `building Temporal server ${options.version} with \`go install ${packages.join(' ')}\` into ${options.binDir}: ` +
      `this takes several minutes (log: ${buildLog})`,
  );
  const started = Date.now();
  // Static binaries (CGO off): nothing in the server needs cgo, and they run on any glibc.
  const env = { ...process.env, GOBIN: staging, CGO_ENABLED: '0' };
  const code = await new Promise<number | null>((resolvePromise, reject) => {
    const out = openSync(buildLog, 'a');
    const child = spawn('go', ['install', ...packages], { env, stdio: ['ignore', out, out] });
    child.once('error', (error: NodeJS.ErrnoException) => {
      closeSync(out);
      reject(
        error.code === 'ENOENT'
          ? new Error(`Building the Temporal server needs Go on PATH (\`go\` not found); install Go ≥ 1.26.8 or put prebuilt binaries in ${options.binDir}`)
          : error,
      );
    });
    child.once('exit', (exitCode) => {
      closeSync(out);
      resolvePromise(exitCode);
    });
  });
  if (code !== 0) {
    const tail = readFileSync(buildLog, 'utf8').trim().split('\n').slice(-15).join('\n');
    throw new Error(`go install of Temporal server ${options.version} failed (exit ${code}); last lines of ${buildLog}:\n${tail}`);
  }
  renameSync(join(staging, 'server'), join(staging, 'temporal-server'));
  renameSync(join(staging, 'sql'), join(staging, 'temporal-sql-tool'));
  try {
    renameSync(staging, options.binDir);
  } catch (error) {
    // Another process finished the same build first: use its binaries.
    if (!binariesBuilt(options)) throw error;
    rmSync(staging, { recursive: true, force: true });
  }
  const builtInMs = Date.now() - started;
  log(`built Temporal server ${options.version} in ${Math.round(builtInMs / 1000)} s`);
  return { ...paths, builtInMs };
}

async function withAdminClient<T>(postgres: PostgresOptions, database: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ host: postgres.host, port: postgres.port, user: postgres.user, password: postgres.password, database });
  logConnectionErrors(client, `postgres(temporal-cluster ${database})`);
  try {
    await client.connect();
  } catch (error) {
    throw new Error(`Cannot connect to PostgreSQL ${postgres.host}:${postgres.port} as ${postgres.user} (database ${database}): ${(error as Error).message}`);
  }
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

/** Creates the two databases when missing; returns the ones it created. */
async function ensureDatabases(options: TemporalClusterOptions): Promise<string[]> {
  const created: string[] = [];
  await withAdminClient(options.postgres, 'postgres', async (client) => {
    for (const name of [options.databases.default, options.databases.visibility]) {
      const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      // CREATE DATABASE takes no parameters; the names are our own constants.
      if (found.rowCount === 0) {
        await client.query(`CREATE DATABASE "${name}"`);
        created.push(name);
      }
    }
  });
  return created;
}

async function schemaVersion(options: TemporalClusterOptions, database: string): Promise<string | undefined> {
  return withAdminClient(options.postgres, database, async (client) => {
    const table = await client.query<{ t: string | null }>(`SELECT to_regclass('public.schema_version')::text AS t`);
    if (!table.rows[0]?.t) return undefined;
    const row = await client.query<{ curr_version: string }>('SELECT curr_version FROM schema_version LIMIT 1');
    return row.rows[0]?.curr_version;
  });
}

/**
 * setup-schema (version 0.0) once, then update-schema to the newest version the binary embeds
 * (`--schema-name`: the schema files ship inside the sql tool, so the Go module cache may be gone).
 * setup-schema is skipped when a version is recorded, because it would reset it to 0.0.
 */
async function applySchemas(options: TemporalClusterOptions, sqlTool: string, log: (line: string) => void): Promise<void> {
  const targets = [
    { database: options.databases.default, schema: 'postgresql/v12/temporal' },
    { database: options.databases.visibility, schema: 'postgresql/v12/visibility' },
  ];
  for (const { database, schema } of targets) {
    // Credentials through the tool's environment variables, not argv (visible in ps).
    const env = {
      ...process.env,
      SQL_PLUGIN: 'postgres12',
      SQL_HOST: options.postgres.host,
      SQL_PORT: String(options.postgres.port),
      SQL_USER: options.postgres.user,
      SQL_PASSWORD: options.postgres.password,
      SQL_DATABASE: database,
    };
    const run = async (args: string[]): Promise<void> => {
      try {
        await execFileAsync(sqlTool, ['--quiet', ...args], { env, maxBuffer: 16 * 1024 * 1024 });
      } catch (error) {
        const detail = error as { stderr?: string; stdout?: string; message: string };
        throw new Error(`temporal-sql-tool ${args.join(' ')} on database ${database} failed: ${(detail.stderr || detail.stdout || detail.message).trim()}`);
      }
    };
    const before = await schemaVersion(options, database);
    if (before === undefined) await run(['setup-schema', '--version', '0.0']);
    await run(['update-schema', '--schema-name', schema]);
    const after = await schemaVersion(options, database);
    if (before !== after) log(`schema ${schema} on ${database}: ${before ?? 'none'} → ${after ?? '?'}`);
  }
}

/** A config file's content: what the YAML files hold. */
type ConfigValue = string | number | boolean | readonly ConfigValue[] | { readonly [key: string]: ConfigValue };

/**
 * A config file: a comment line, then the YAML. Every string double-quoted, as JSON would write
 * it: no value can be read back as another type by the server's YAML parser (a password `0x1f`,
 * `null` or `no`), whichever YAML version it follows.
 */
export function configFileText(comment: string, value: ConfigValue): string {
  return `# ${comment}\n${stringify(value, { defaultStringType: 'QUOTE_DOUBLE', defaultKeyType: 'PLAIN' })}`;
}

/**
 * Dynamic config mirroring what the dev server runs with (devstack/temporal.ts and the
 * Temporal CLI's start-dev defaults), so the same code sees the same limits on both.
 */
export function dynamicConfig(): Record<string, ConfigValue> {
  const value = (v: string | number | boolean): ConfigValue => [{ value: v, constraints: {} }];
  return {
    // Our card workflows start many children per second; the defaults throttle one namespace.
    'frontend.namespaceRPS': value(10000),
    'frontend.namespaceCount': value(10000),
    // start-dev defaults: search attributes visible at once (tests register then use them) and
    // persistence QPS raised to match the cache bypass.
    'system.forceSearchAttributesCacheRefreshOnRead': value(true),
    'frontend.persistenceMaxQPS': value(10000),
    'history.persistenceMaxQPS': value(45000),
    'frontend.namespaceRPS.visibility': value(100),
    'history.hostLevelCacheMaxSize': value(8096),
    // Request-check and setMode are workflow updates; worker versioning (WORKER_VERSIONING=on)
    // needs deployment versions. Both default on in v1.32; stated so a downgrade fails loudly.
    'frontend.enableUpdateWorkflowExecution': value(true),
    'frontend.enableUpdateWorkflowExecutionAsyncAccepted': value(true),
    'frontend.workerVersioningWorkflowAPIs': value(true),
    'system.enableDeploymentVersions': value(true),
    // Request-check runs carry priority key 1: honoured only with the priority matcher (off by
    // default). The cluster keeps the server's default partitions (order holds within each).
    'matching.useNewMatcher': value(true),
  };
}

/** The server config of one service (they differ in the metrics port). */
export function serviceConfig(options: TemporalClusterOptions, service: ClusterService, dynamicConfigFile: string): Record<string, ConfigValue> {
  const { postgres } = options;
  const store = (database: string, maxConns: number): ConfigValue => ({
    sql: {
      pluginName: 'postgres12',
      databaseName: database,
      connectAddr: `${postgres.host}:${postgres.port}`,
      connectProtocol: 'tcp',
      user: postgres.user,
      password: postgres.password,
      // The PostgreSQL is shared with the project and its tests (max_connections 300): 4 processes
      // × (12 + 4) stays well below.
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const services: Record<string, ConfigValue> = {};
  for (const name of CLUSTER_SERVICES) {
    const ports = servicePorts(options, name);
    services[name] = {
      rpc: {
        grpcPort: ports.grpc,
        membershipPort: ports.membership,
        bindOnIP: options.host,
        ...(name === 'frontend' ? { httpPort: frontendHttpPort(options) } : {}),
      },
    };
  }
  return {
    log: { stdout: true, level: options.logLevel, format: 'json' },
    persistence: {
      defaultStore: 'postgres-default',
      visibilityStore: 'postgres-visibility',
      numHistoryShards: options.numHistoryShards,
      datastores: {
        'postgres-default': store(options.databases.default, 12),
        'postgres-visibility': store(options.databases.visibility, 4),
      },
    },
    global: {
      membership: { maxJoinDuration: '30s', broadcastAddress: options.host },
      // One metrics listener per process: each service has its own config file for this port.
      metrics: { prometheus: { framework: 'tally', timerType: 'histogram', listenAddress: `${options.host}:${servicePorts(options, service).metrics}` } },
    },
    services,
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: {
        active: {
          enabled: true,
          initialFailoverVersion: 1,
          rpcName: 'frontend',
          rpcAddress: frontendAddress(options),
          httpAddress: `${options.host}:${frontendHttpPort(options)}`,
        },
      },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } },
    namespaceDefaults: { archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } } },
    // The worker service's system workflows reach the cluster through the frontend.
    publicClient: { hostPort: frontendAddress(options) },
    dynamicConfigClient: { filepath: dynamicConfigFile, pollInterval: '10s' },
  };
}

/** Writes one server config per service (they differ in the metrics port) and the dynamic config. */
export function writeClusterConfigs(options: TemporalClusterOptions): Record<ClusterService, string> {
  const configDir = join(options.dir, 'config');
  mkdirSync(configDir, { recursive: true });
  const dynamicConfigFile = join(configDir, 'dynamicconfig.yaml');
  writeFileSync(dynamicConfigFile, configFileText('Generated by devstack/temporalCluster.ts', dynamicConfig()));
  const files = {} as Record<ClusterService, string>;
  for (const service of CLUSTER_SERVICES) {
    const file = join(configDir, `${service}.yaml`);
    writeFileSync(
      file,
      configFileText('Generated by devstack/temporalCluster.ts (holds the PostgreSQL password)', serviceConfig(options, service, dynamicConfigFile)),
      { mode: 0o600 },
    );
    chmodSync(file, 0o600);
    files[service] = file;
  }
  return files;
}

function pidFile(options: TemporalClusterOptions, service: ClusterService): string {
  return join(options.dir, `${service}.pid`);
}

export function serviceLogFile(options: TemporalClusterOptions, service: ClusterService): string {
  return join(options.dir, 'logs', `${service}.log`);
}

/**
 * The pid of the running service process, or undefined. The pid must still be our server started
 * for this service (its command line says so): after a reboot a stale pid file may name anything.
 */
export function servicePid(options: TemporalClusterOptions, service: ClusterService): number | undefined {
  const pid = readPid(pidFile(options, service));
  if (pid === undefined || !isAlive(pid)) return undefined;
  try {
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return args.includes(binaryPaths(options.binDir).server) && args.includes(service) ? pid : undefined;
  } catch {
    // No /proc (not Linux): trust the pid file.
    return pid;
  }
}

/**
 * Whether the process last started for `service` is still alive — our server or not yet: between
 * fork and exec (seconds on a starved machine) its command line is still that of the node process
 * that spawned it, so servicePid does not know it yet. A zombie counts as gone.
 */
export function startedProcessAlive(options: TemporalClusterOptions, service: ClusterService): boolean {
  const pid = readPid(pidFile(options, service));
  if (pid === undefined || !isAlive(pid)) return false;
  try {
    // /proc/<pid>/stat: "pid (comm) state …"; comm may hold spaces and parentheses, the state follows the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

/** The server reads TEMPORAL_* variables (root, config dir, services): none may leak in from our shell. */
function serverEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('TEMPORAL_')));
}

/** Starts one service unless its process runs; refuses a port held by something else. */
export async function startClusterService(options: TemporalClusterOptions, service: ClusterService, configFile: string): Promise<'reused' | 'started'> {
  if (servicePid(options, service) !== undefined) return 'reused';
  const ports = servicePorts(options, service);
  for (const port of [ports.grpc, ports.membership]) {
    if (await isTcpOpen(options.host, port)) {
      throw new Error(
        `Temporal ${service}: port ${options.host}:${port} is in use, but not by the ${options.version} ${service} ` +
          `whose pid ${pidFile(options, service)} records: ` +
          'stop that process (`npm run temporal:cluster -- down` from the version that started it) or choose another --port',
      );
    }
  }
  const { server } = binaryPaths(options.binDir);
  mkdirSync(join(options.dir, 'logs'), { recursive: true });
  spawnDetached(
    server,
    ['--config-file', configFile, '--allow-no-auth', 'start', '--service', service],
    serviceLogFile(options, service),
    pidFile(options, service),
    {
      env: serverEnv(),
      cwd: options.dir,
    },
  );
  return 'started';
}

async function temporalCli(args: readonly string[]): Promise<string> {
  const { stdout } = await execFileAsync(TEMPORAL_BIN, [...args], { maxBuffer: 16 * 1024 * 1024 });
  return stdout;
}

async function succeeds(args: readonly string[]): Promise<boolean> {
  try {
    await temporalCli(args);
    return true;
  } catch {
    return false;
  }
}

function lastLogLines(options: TemporalClusterOptions, service: ClusterService): string {
  const file = serviceLogFile(options, service);
  if (!existsSync(file)) return '(no log)';
  return readFileSync(file, 'utf8').trim().split('\n').slice(-5).join('\n');
}

/** Waits for a service's gRPC port; fails at once (with its log) when the process died. */
async function waitForService(options: TemporalClusterOptions, service: ClusterService, timeoutMs: number): Promise<void> {
  const { grpc } = servicePorts(options, service);
  await waitUntil(
    `Temporal ${service} on ${options.host}:${grpc}`,
    async () => {
      // Not servicePid: a process not yet exec'd is starting, not gone (taking it for gone once
      // started a second server whose bind failed, and left the pid file naming that one).
      if (!startedProcessAlive(options, service)) {
        throw new Error(`Temporal ${service} exited during start; last lines of ${serviceLogFile(options, service)}:\n${lastLogLines(options, service)}`);
      }
      return isTcpOpen(options.host, grpc);
    },
    timeoutMs,
  );
}

/** Creates the namespace and registers the project's search attributes (both idempotent). */
async function ensureNamespace(options: TemporalClusterOptions, log: (line: string) => void): Promise<void> {
  const address = ['--address', frontendAddress(options)];
  const namespace = ['--namespace', options.namespace];
  if (!(await succeeds(['operator', 'namespace', 'describe', ...namespace, ...address]))) {
    try {
      await temporalCli(['operator', 'namespace', 'create', ...namespace, '--retention', '72h', ...address]);
      log(`namespace ${options.namespace} created`);
    } catch (error) {
      // Two `up`s at once: the other one created it.
      if (!(await succeeds(['operator', 'namespace', 'describe', ...namespace, ...address]))) {
        throw new Error(
          `Creating namespace ${options.namespace} on ${frontendAddress(options)} failed: ${(error as { stderr?: string }).stderr ?? String(error)}`,
        );
      }
    }
  }
  // A new namespace reaches the frontend's namespace registry on its next refresh (≤ 10 s).
  let listed = '';
  await waitUntil(
    `namespace ${options.namespace} in the frontend's registry`,
    async () => {
      try {
        listed = await temporalCli(['operator', 'search-attribute', 'list', ...namespace, ...address, '--output', 'json']);
        return true;
      } catch {
        return false;
      }
    },
    60_000,
  );
  for (const [name, type] of Object.entries(SEARCH_ATTRIBUTES)) {
    if (listed.includes(`"${name}"`)) continue;
    try {
      await temporalCli(['operator', 'search-attribute', 'create', '--name', name, '--type', type, ...namespace, ...address]);
      log(`search attribute ${name} (${type}) registered`);
    } catch (error) {
      throw new Error(
        `Registering search attribute ${name} (${type}) on ${frontendAddress(options)} failed: ${(error as { stderr?: string }).stderr ?? String(error)}`,
      );
    }
  }
  // Visibility answers (the query path the project uses to list and clean up runs).
  await waitUntil(`visibility of namespace ${options.namespace}`, () => succeeds(['workflow', 'list', '--limit', '1', ...namespace, ...address]), 60_000);
}

/**
 * History and matching answer through the frontend: an open gRPC port is not enough, a service
 * serves only once it joined the membership ring (the frontend says "Not enough hosts" before).
 */
async function servicesAnswer(options: TemporalClusterOptions): Promise<boolean> {
  const args = ['--namespace', options.namespace, '--address', frontendAddress(options)];
  // Matching: describing a task queue is answered by the matching service.
  if (!(await succeeds(['task-queue', 'describe', '--task-queue', 'cluster-readiness-probe', ...args]))) return false;
  // History: "not found" for a workflow that never existed comes from the history service.
  try {
    await temporalCli(['workflow', 'describe', '--workflow-id', 'cluster-readiness-probe', ...args]);
    return true;
  } catch (error) {
    return /not found/i.test((error as { stderr?: string }).stderr ?? '');
  }
}

export interface ClusterUpResult {
  readonly address: string;
  readonly services: Readonly<Record<ClusterService, 'reused' | 'started'>>;
  readonly createdDatabases: readonly string[];
  /** Wall-clock per phase (ms). */
  readonly timings: Readonly<Record<string, number>>;
}

/**
 * Brings the cluster up, idempotently: builds what is missing, creates and migrates the
 * databases, starts the services whose process is not running, then the namespace and search
 * attributes. A killed service is started again by the next `up`.
 */
export async function temporalClusterUp(options: TemporalClusterOptions, log: (line: string) => void): Promise<ClusterUpResult> {
  const timings: Record<string, number> = {};
  const phase = async <T>(name: string, run: () => Promise<T>): Promise<T> => {
    const started = Date.now();
    try {
      return await run();
    } finally {
      timings[name] = Date.now() - started;
    }
  };
  const binaries = await phase('binaries', () => ensureServerBinaries(options, log));
  await phase('temporalCli', () => ensureTemporalCli(log));
  const createdDatabases = await phase('databases', () => ensureDatabases(options));
  await phase('schemas', () => applySchemas(options, binaries.sqlTool, log));
  const configFiles = writeClusterConfigs(options);
  const services = {} as Record<ClusterService, 'reused' | 'started'>;
  await phase('services', async () => {
    // One at a time: on new databases the first service writes the cluster metadata, and services
    // starting together race to insert it (one exits with "Failed to apply cluster metadata").
    // A service that still exits during start is started once more.
    for (const service of CLUSTER_SERVICES) {
      services[service] = await startClusterService(options, service, configFiles[service]);
      try {
        await waitForService(options, service, 120_000);
      } catch (error) {
        if (startedProcessAlive(options, service)) throw error;
        log(`${service} exited during start; starting it once more (${error instanceof Error ? error.message.split('\n')[0] : String(error)})`);
        services[service] = await startClusterService(options, service, configFiles[service]);
        await waitForService(options, service, 120_000);
      }
    }
    await waitUntil(
      `Temporal cluster health at ${frontendAddress(options)}`,
      () => succeeds(['operator', 'cluster', 'health', '--address', frontendAddress(options)]),
      120_000,
    );
  });
  await phase('namespace', () => ensureNamespace(options, log));
  await phase('ready', () => waitUntil(`Temporal history and matching answering through ${frontendAddress(options)}`, () => servicesAnswer(options), 120_000));
  return { address: frontendAddress(options), services, createdDatabases, timings };
}

/** Stops the service processes this project started (frontend first, history last). */
export async function temporalClusterDown(options: TemporalClusterOptions): Promise<Record<ClusterService, boolean>> {
  const stopped = {} as Record<ClusterService, boolean>;
  for (const service of ['frontend', 'worker', 'matching', 'history'] as const) {
    if (servicePid(options, service) === undefined) {
      // Never signal a pid that is no longer our server; drop the stale file.
      rmSync(pidFile(options, service), { force: true });
      stopped[service] = false;
    } else {
      stopped[service] = await stopPidFile(pidFile(options, service));
    }
  }
  return stopped;
}

export interface ServiceStatus {
  readonly service: ClusterService;
  readonly pid: number | undefined;
  readonly grpcPort: number;
  readonly listening: boolean;
}

export async function temporalClusterStatus(options: TemporalClusterOptions): Promise<ServiceStatus[]> {
  return Promise.all(
    CLUSTER_SERVICES.map(async (service) => {
      const { grpc } = servicePorts(options, service);
      return { service, pid: servicePid(options, service), grpcPort: grpc, listening: await isTcpOpen(options.host, grpc) };
    }),
  );
}
