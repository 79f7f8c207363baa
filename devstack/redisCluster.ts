/**
 * A local Redis Cluster on loopback for development and `npm run test:cluster`: 3 masters + 3
 * replicas of Debian's `redis-server --cluster-enabled yes`, ports 7000–7005 (cluster bus +10000),
 * data under `<DATA_DIR>/redis-cluster/<port>/`. Idempotent: a running, healthy cluster is reused,
 * a node that is down (e.g. killed by a failover test) is started again from its nodes.conf and
 * rejoins, and only six fresh nodes are joined with `redis-cli --cluster create`.
 *
 * Persistence: AOF for development, none for `up --test` (tests keep no data across restarts; a
 * failover is served by the replicas, and AOF fsyncs cost the load-sensitive tests their margin).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureRedisServer } from './redis.js';
import { Redis } from 'ioredis';
import { execFileAsync, isTcpOpen, readPid, isAlive, spawnDetached, stopPidFile, waitUntil } from './process.js';

export const CLUSTER_HOST = '127.0.0.1';
export const CLUSTER_PORTS = [7000, 7001, 7002, 7003, 7004, 7005] as const;
/** REDIS_CLUSTER_NODES for the local cluster. */
export const LOCAL_CLUSTER_NODES = CLUSTER_PORTS.map((port) => `${CLUSTER_HOST}:${port}`).join(',');
/**
 * A master unreachable this long is failed over. Short, so a test's failover takes seconds;
 * long enough that a busy machine's scheduling hiccups do not trigger one.
 */
export const CLUSTER_NODE_TIMEOUT_MS = 3000;

export type ClusterPersistence = 'aof' | 'none';

export interface ClusterOptions {
  readonly host?: string;
  readonly ports?: readonly number[];
  /**
   * Append-only file on every node (development) or no persistence (tests). Unset: what the last
   * `up` asked for (AOF when none did), so a caller that does not care (a benchmark) does not
   * switch a cluster a test run is using.
   */
  readonly persistence?: ClusterPersistence;
}

/** Where the persistence of the last `up` is kept, so a node restarted later starts the same way. */
function persistenceFile(root: string): string {
  return join(root, 'persistence');
}

function recordedPersistence(root: string): ClusterPersistence {
  const file = persistenceFile(root);
  return existsSync(file) && readFileSync(file, 'utf8').trim() === 'none' ? 'none' : 'aof';
}

function nodeDir(root: string, port: number): string {
  return join(root, String(port));
}

/** redis-cli against one node; stdout. */
async function cli(host: string, port: number, ...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync('redis-cli', ['-h', host, '-p', String(port), ...args], { maxBuffer: 16 * 1024 * 1024 });
  return stdout;
}

/** `CLUSTER INFO` of one node as fields (`cluster_state`, `cluster_slots_assigned`, …). */
export async function clusterInfo(host: string, port: number): Promise<Record<string, string>> {
  const fields: Record<string, string> = {};
  for (const line of (await cli(host, port, 'cluster', 'info')).split(/\r?\n/)) {
    const at = line.indexOf(':');
    if (at > 0) fields[line.slice(0, at)] = line.slice(at + 1).trim();
  }
  return fields;
}

/**
 * Slot ranges whose replica this node lists in `CLUSTER SLOTS`: what clients discover. Redis lists
 * a replica there only once its replication offset is above 0 — on a new, empty cluster that is
 * after the master's first replication ping (up to `repl-ping-replica-period`, 10 s) — so until
 * then a client sees the masters only.
 */
export async function rangesWithReplica(host: string, port: number): Promise<number> {
  const connection = new Redis({ host, port, lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await connection.connect();
    const ranges = (await connection.call('CLUSTER', 'SLOTS')) as unknown[][];
    return ranges.filter((range) => range.length >= 4).length;
  } finally {
    connection.disconnect();
  }
}

/** Healthy = state ok, every slot served, and this node knows all the others. */
export function isHealthy(info: Record<string, string>, nodes: number): boolean {
  return info.cluster_state === 'ok' && info.cluster_slots_ok === '16384' && Number(info.cluster_known_nodes) >= nodes;
}

/** Every node of `ports` healthy (isHealthy, knowing all of them); a node that does not answer is not. */
export async function allNodesHealthy(host: string, ports: readonly number[]): Promise<boolean> {
  return (await Promise.all(ports.map((port) => clusterInfo(host, port).catch(() => ({}))))).every((info) => isHealthy(info, ports.length));
}

function startNode(binary: string, host: string, port: number, dir: string, persistence: ClusterPersistence): void {
  mkdirSync(dir, { recursive: true });
  const args = [
    '--bind',
    host,
    '--port',
    String(port),
    '--dir',
    dir,
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    'nodes.conf',
    '--cluster-node-timeout',
    String(CLUSTER_NODE_TIMEOUT_MS),
    // While one master fails over, the other masters' accounts keep being served.
    '--cluster-require-full-coverage',
    'no',
    // Leases and due scores must never be evicted (docs/design.md, 'Failure handling').
    '--maxmemory-policy',
    'noeviction',
    '--appendonly',
    persistence === 'aof' ? 'yes' : 'no',
    '--appendfsync',
    'everysec',
    '--save',
    '',
    '--daemonize',
    'no',
  ];
  spawnDetached(binary, args, join(dir, 'redis.log'), join(dir, 'redis.pid'));
}

/** Starts (or reuses) the local cluster; resolves once every slot is served. */
export async function startRedisCluster(root: string, log: (line: string) => void, options: ClusterOptions = {}): Promise<'reused' | 'started' | 'created'> {
  const host = options.host ?? CLUSTER_HOST;
  const ports = options.ports ?? CLUSTER_PORTS;
  const persistence = options.persistence ?? recordedPersistence(root);
  mkdirSync(root, { recursive: true });
  writeFileSync(persistenceFile(root), `${persistence}\n`);
  const down: number[] = [];
  for (const port of ports) if (!(await isTcpOpen(host, port))) down.push(port);
  if (down.length === 0 && isHealthy(await clusterInfo(host, ports[0]!), ports.length)) {
    await applyPersistence(host, ports, persistence, log);
    return 'reused';
  }
  if (down.length > 0) {
    const binary = await ensureRedisServer(log);
    for (const port of down) startNode(binary, host, port, nodeDir(root, port), persistence);
    await waitUntil(
      `Redis Cluster nodes ${down.join(', ')}`,
      async () => (await Promise.all(down.map((port) => isTcpOpen(host, port)))).every(Boolean),
      20_000,
    );
    log(`redis-cluster: node(s) ${down.join(', ')} started`);
  }
  // A node just started answers LOADING until its AOF is read; one that never reports a cluster state is not ours.
  let infos: Record<string, string>[] = [];
  await waitUntil(
    'every node answering CLUSTER INFO',
    async () => {
      infos = await Promise.all(ports.map((port) => clusterInfo(host, port).catch(() => ({}))));
      return infos.every((info) => info.cluster_state !== undefined);
    },
    20_000,
  ).catch(() => {
    const strangers = ports.filter((_, i) => infos[i]?.cluster_state === undefined).map((port) => `${host}:${port}`);
    throw new Error(`${strangers.join(', ')} answer(s) but not as Redis Cluster node(s) (another server on the port, or still loading: see its redis.log)`);
  });
  // Six nodes that each know only themselves and serve no slot: a new cluster to create.
  const fresh = infos.every((info) => info.cluster_known_nodes === '1' && info.cluster_slots_assigned === '0');
  if (fresh) {
    const replicas = ports.length >= 6 ? 1 : 0;
    await execFileAsync(
      'redis-cli',
      ['--cluster', 'create', ...ports.map((port) => `${host}:${port}`), '--cluster-replicas', String(replicas), '--cluster-yes'],
      {
        maxBuffer: 16 * 1024 * 1024,
      },
    );
  }
  // Restarted nodes rejoin from nodes.conf; a new cluster propagates its configuration by gossip.
  const waited = await waitUntil(
    'Redis Cluster state ok on every node',
    async () =>
      (await allNodesHealthy(host, ports)) &&
      // Clients discover every replica: each node lists one per slot range (3 masters + 3 replicas).
      (await Promise.all(ports.map((port) => rangesWithReplica(host, port).catch(() => -1)))).every((n) => n >= (ports.length >= 6 ? ports.length / 2 : 0)),
    60_000,
  ).catch((error: unknown) => {
    throw new Error(`${error instanceof Error ? error.message : String(error)}; to start over: scripts/services.ts down --cluster, then delete ${root}`);
  });
  log(`redis-cluster: state ok in ${waited} ms`);
  // Nodes that were already running keep the persistence they were started with until told.
  await applyPersistence(host, ports, persistence, log);
  return fresh ? 'created' : 'started';
}

/**
 * Running nodes started with the other persistence are switched at run time (CONFIG SET, no
 * restart, no failover): `appendonly no` stops the AOF at once, `yes` rewrites one from memory.
 */
async function applyPersistence(host: string, ports: readonly number[], persistence: ClusterPersistence, log: (line: string) => void): Promise<void> {
  const wanted = persistence === 'aof' ? 'yes' : 'no';
  const switched: number[] = [];
  for (const port of ports) {
    const current = (await cli(host, port, 'config', 'get', 'appendonly')).split(/\r?\n/)[1]?.trim();
    if (current === wanted) continue;
    const reply = (await cli(host, port, 'config', 'set', 'appendonly', wanted)).trim();
    if (reply !== 'OK') throw new Error(`CONFIG SET appendonly ${wanted} on ${host}:${port} answered ${reply}`);
    switched.push(port);
  }
  if (switched.length > 0) log(`redis-cluster: appendonly ${wanted} set on node(s) ${switched.join(', ')} (persistence ${persistence})`);
}

/** Stops the nodes this project started (pid files); returns how many. */
export async function stopRedisCluster(root: string, options: ClusterOptions = {}): Promise<number> {
  let stopped = 0;
  for (const port of options.ports ?? CLUSTER_PORTS) {
    const pidFile = join(nodeDir(root, port), 'redis.pid');
    if (existsSync(pidFile) && (await stopPidFile(pidFile))) stopped += 1;
  }
  return stopped;
}

/** The pid of the local node on `port`, when this project started it and it runs. */
export function clusterNodePid(root: string, port: number): number | undefined {
  const pid = readPid(join(nodeDir(root, port), 'redis.pid'));
  return pid !== undefined && isAlive(pid) ? pid : undefined;
}

/**
 * Starts one node again (after a test killed it), with the persistence of the last `up`; it
 * rejoins the cluster from its nodes.conf (without persistence: empty, as a replica of the
 * replica promoted in its place, which it syncs from).
 */
export async function restartClusterNode(root: string, port: number, log: (line: string) => void, host = CLUSTER_HOST): Promise<void> {
  const dir = nodeDir(root, port);
  if (!existsSync(join(dir, 'nodes.conf'))) throw new Error(`no cluster node was ever started in ${dir}`);
  if (await isTcpOpen(host, port)) return;
  startNode(await ensureRedisServer(log), host, port, dir, recordedPersistence(root));
  await waitUntil(`Redis Cluster node ${port}`, () => isTcpOpen(host, port), 20_000);
}
