/**
 * Claim round latency on Redis Cluster beside single Redis, with the same scripts, client settings
 * (ioredis, auto-pipelining, one connection) and work (docs/design.md, 'Operating it': on a Redis
 * Cluster). Used by the `cluster` scenario and bench/cluster-redis.ts:
 *
 * - `one account`: N due cards in one account, claim rounds of 200 + acquireExec + finish per
 *   card, one account at a time: the round's own latency (the script plus one round trip);
 * - `A accounts`: the same N cards spread over A accounts drained concurrently: on the cluster
 *   the accounts' slots are spread over its masters, on single Redis they share one server.
 *
 * The backends alternate which goes first per scenario. Single Redis is REDIS_URL; the cluster is
 * REDIS_CLUSTER_NODES, else the local one (`scripts/services.ts up --cluster`).
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { ClusterNode, Config } from '../../src/config/index.js';
import { connectRedis, connectRedisCluster } from '../../src/redis/connect.js';
import { masterNodes, type RedisConnection } from '../../src/redis/connection.js';
import { deleteMatching } from '../../testkit/redis.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { DueField } from '../../src/redis/dueFields.js';
import { CLUSTER_HOST, CLUSTER_PORTS, clusterNodePid, LOCAL_CLUSTER_NODES, startRedisCluster } from '../../devstack/redisCluster.js';
import { dataDir } from '../../devstack/paths.js';
import type { Table } from './report.js';
import { percentile } from './stats.js';

export const ROUND_SIZE = 200;
const LEASE_MS = 60_000;
const UPSERT_BATCH = 5_000;
export const DEFAULT_CLAIM_CARDS = 20_000;
export const DEFAULT_CLAIM_ACCOUNTS = 30;

export type Backend = 'single' | 'cluster';

export interface ClaimRunResult {
  readonly scenario: string;
  readonly backend: Backend;
  readonly accounts: number;
  readonly cards: number;
  readonly cyclesPerSecond: number;
  readonly claimRounds: number;
  readonly claimP50Ms: number;
  readonly claimP99Ms: number;
}

export interface ClaimRatio {
  readonly scenario: string;
  readonly claimP50: number;
  readonly claimP99: number;
  readonly cyclesPerSecond: number;
}

export interface ClaimComparison {
  readonly roundSize: number;
  readonly clusterNodes: readonly string[];
  /** Whether the cluster is the local one this project starts (its node processes are known). */
  readonly localCluster: boolean;
  /** Persistence differs between the two unless configured alike: said beside the figures. */
  readonly appendonly: Readonly<Record<Backend, string>>;
  readonly results: readonly ClaimRunResult[];
  readonly ratios: readonly ClaimRatio[];
}

/** The cluster's nodes: REDIS_CLUSTER_NODES when set, else the local cluster. */
export function clusterNodesOf(config: Config): { nodes: ClusterNode[]; local: boolean } {
  const configured = config.REDIS_CLUSTER_NODES ?? [];
  return configured.length > 0 ? { nodes: [...configured], local: false } : { nodes: CLUSTER_PORTS.map((port) => ({ host: CLUSTER_HOST, port })), local: true };
}

/** Starts (or reuses) the local Redis Cluster unless REDIS_CLUSTER_NODES names another one. */
export async function ensureRedisCluster(config: Config, log: (line: string) => void): Promise<void> {
  if (!clusterNodesOf(config).local) return;
  const how = await startRedisCluster(join(dataDir(config.DATA_DIR), 'redis-cluster'), log);
  log(`Redis Cluster ${LOCAL_CLUSTER_NODES}: ${how}`);
}

/** Pids of the local cluster's nodes (for the load monitor: the run drives them). */
export function redisClusterPids(config: Config): number[] {
  const root = join(dataDir(config.DATA_DIR), 'redis-cluster');
  return CLUSTER_PORTS.map((port) => clusterNodePid(root, port)).filter((pid): pid is number => pid !== undefined);
}

/** Claim rounds of 200 until nothing is due, each claimed card acquired and finished; full rounds timed. */
async function drainAccount(store: CarrierQueueStore, carrierId: string, latencies: number[]): Promise<number> {
  let cycles = 0;
  for (let round = 0; ; round += 1) {
    const now = Date.now();
    const started = performance.now();
    const { claimed } = await store.claim({
      carrierId,
      now,
      leaseMs: LEASE_MS,
      inflightLimit: ROUND_SIZE,
      priorityRatio: 0.5,
      tokenPrefix: `b${carrierId}-${round}`,
      typeGroups: { card_status: 'g1' },
      countRealname: false,
    });
    if (claimed.length === ROUND_SIZE) latencies.push(performance.now() - started);
    if (claimed.length === 0) return cycles;
    await Promise.all(
      claimed.map(async ({ cardId, token }) => {
        if ((await store.acquireExec(carrierId, cardId, token, 'bench', LEASE_MS, now)) !== 'acquired') throw new Error(`acquireExec ${cardId} refused`);
        const at = Date.now();
        if (
          !(await store.finish({
            carrierId,
            cardId,
            token,
            now: at,
            set: { [DueField.due('card_status')]: at + 3_600_000, [DueField.ok('card_status')]: at },
            del: [],
          }))
        )
          throw new Error(`finish ${cardId} lost its claim`);
      }),
    );
    cycles += claimed.length;
  }
}

/** One scenario on one backend: seed, then drain the accounts (sequentially or concurrently). */
async function runClaims(
  redis: RedisConnection,
  backend: Backend,
  scenario: string,
  namespace: string,
  accounts: readonly string[],
  cards: number,
  concurrent: boolean,
): Promise<ClaimRunResult> {
  const store = new CarrierQueueStore(redis, namespace);
  const now = Date.now();
  for (let start = 0; start < cards; start += UPSERT_BATCH) {
    // Due over the last minute so claims walk a realistic ZSET.
    const batch = Array.from({ length: Math.min(UPSERT_BATCH, cards - start) }, (_, j) => {
      const i = start + j;
      return { carrierId: accounts[i % accounts.length]!, cardId: `c${i}`, now, dues: { card_status: now - 60_000 + (i % 60_000) } };
    });
    await store.upsertMany(batch);
  }
  const latencies: number[] = [];
  const started = performance.now();
  let cycles = 0;
  if (concurrent) cycles = (await Promise.all(accounts.map((carrierId) => drainAccount(store, carrierId, latencies)))).reduce((a, b) => a + b, 0);
  else for (const carrierId of accounts) cycles += await drainAccount(store, carrierId, latencies);
  const seconds = (performance.now() - started) / 1000;
  if (cycles !== cards) throw new Error(`${backend} ${scenario}: executed ${cycles} of ${cards} cards`);
  latencies.sort((a, b) => a - b);
  return {
    scenario,
    backend,
    accounts: accounts.length,
    cards,
    cyclesPerSecond: Math.round(cycles / seconds),
    claimRounds: latencies.length,
    claimP50Ms: Number(percentile(latencies, 50).toFixed(2)),
    claimP99Ms: Number(percentile(latencies, 99).toFixed(2)),
  };
}

/** Both backends, both scenarios; every key written is deleted again. */
export async function compareClaimRounds(config: Config, sizes: { cards: number; accounts: number }, log: (line: string) => void): Promise<ClaimComparison> {
  const { nodes, local } = clusterNodesOf(config);
  const namespace = `bench:cluster:${randomUUID().slice(0, 8)}:`;
  const connections: Record<Backend, RedisConnection> = {
    single: await connectRedis(config.REDIS_URL, { connectionName: 'bench-cluster-single' }),
    cluster: await connectRedisCluster(nodes, { connectionName: 'bench-cluster' }),
  };
  try {
    const plan = [
      { name: 'one account', accounts: ['one'], concurrent: false, order: ['single', 'cluster'] as Backend[] },
      {
        name: `${sizes.accounts} accounts`,
        accounts: Array.from({ length: sizes.accounts }, (_, i) => `many${i}`),
        concurrent: true,
        order: ['cluster', 'single'] as Backend[],
      },
    ];
    const results: ClaimRunResult[] = [];
    for (const scenario of plan) {
      for (const backend of scenario.order) {
        log(`claim rounds, ${scenario.name}: ${backend} Redis (${sizes.cards} cards)`);
        const scoped = `${namespace}${backend}:`;
        results.push(await runClaims(connections[backend], backend, scenario.name, scoped, scenario.accounts, sizes.cards, scenario.concurrent));
        await deleteMatching(connections[backend], `${scoped}*`);
      }
    }
    const ratios = plan.map((scenario): ClaimRatio => {
      const of = (backend: Backend): ClaimRunResult => results.find((r) => r.scenario === scenario.name && r.backend === backend)!;
      const ratio = (a: number, b: number): number => (b > 0 ? Number((a / b).toFixed(2)) : 0);
      return {
        scenario: scenario.name,
        claimP50: ratio(of('cluster').claimP50Ms, of('single').claimP50Ms),
        claimP99: ratio(of('cluster').claimP99Ms, of('single').claimP99Ms),
        cyclesPerSecond: ratio(of('cluster').cyclesPerSecond, of('single').cyclesPerSecond),
      };
    });
    const appendonly = async (redis: RedisConnection): Promise<string> => ((await masterNodes(redis)[0]!.config('GET', 'appendonly')) as string[])[1] ?? '?';
    return {
      roundSize: ROUND_SIZE,
      clusterNodes: nodes.map((node) => `${node.host}:${node.port}`),
      localCluster: local,
      appendonly: { single: await appendonly(connections.single), cluster: await appendonly(connections.cluster) },
      results,
      ratios,
    };
  } finally {
    await deleteMatching(connections.single, `${namespace}*`).catch(() => undefined);
    await deleteMatching(connections.cluster, `${namespace}*`).catch(() => undefined);
    await Promise.all(Object.values(connections).map((redis) => redis.quit()));
  }
}

/** Per run, then cluster ÷ single per scenario (below 1 = the cluster is faster / lower). */
export function claimTables(comparison: ClaimComparison): Table[] {
  return [
    {
      headers: ['claim scenario', 'Redis', 'accounts', 'cards', 'cycles/s', 'claim rounds', 'claim p50 ms', 'claim p99 ms'],
      numeric: [false, false, true, true, true, true, true, true],
      rows: comparison.results.map((r) => [r.scenario, r.backend, r.accounts, r.cards, r.cyclesPerSecond, r.claimRounds, r.claimP50Ms, r.claimP99Ms]),
    },
    {
      headers: ['claim scenario', 'claim p50 cluster ÷ single', 'claim p99 cluster ÷ single', 'cycles/s cluster ÷ single'],
      numeric: [false, true, true, true],
      rows: comparison.ratios.map((r) => [r.scenario, r.claimP50, r.claimP99, r.cyclesPerSecond]),
    },
  ];
}

/** What a reader needs beside the claim tables. */
export function claimExplain(comparison: ClaimComparison): string {
  const cluster = comparison.localCluster
    ? `the local Redis Cluster (${comparison.clusterNodes.length} nodes: 3 masters + 3 replicas on this host)`
    : `REDIS_CLUSTER_NODES (${comparison.clusterNodes.join(', ')})`;
  return (
    `Claim rounds: ${cluster}, appendonly ${comparison.appendonly.cluster} (every write also goes to a replica), ` +
    `vs single Redis (REDIS_URL), appendonly ${comparison.appendonly.single}. ` +
    `One connection per backend, auto-pipelining; claim rounds of ${comparison.roundSize} then acquireExec + ` +
    `finish per card (a cycle); only full rounds are timed. ` +
    '"one account": the accounts drained one at a time (the round\'s own latency); "N accounts": drained ' +
    'concurrently (on the cluster their slots spread over the masters).'
  );
}
