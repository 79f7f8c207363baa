/**
 * `npm run services:up` / `services:down`: start or stop Temporal, Redis and PostgreSQL on
 * loopback (idempotent; what already runs is reused), and with --cluster a local Redis Cluster.
 */
import { join } from 'node:path';
import { loadConfigOrExit } from '../src/config/index.js';
import { servicesDown, servicesUp } from '../devstack/index.js';
import { dataDir } from '../devstack/paths.js';
import { LOCAL_CLUSTER_NODES, startRedisCluster, stopRedisCluster } from '../devstack/redisCluster.js';

const HELP = `usage: tsx scripts/services.ts <up|down> [--test] [--cluster]

  up         start (or reuse) Temporal dev server + Web UI, Redis, PostgreSQL on 127.0.0.1
  down       stop the services this project started
  --test     Redis without persistence (throw-away test data), the Redis Cluster too
  --cluster  up: also start (or reuse) a Redis Cluster on 127.0.0.1:7000-7005 (3 masters +
             3 replicas, AOF (none with --test), noeviction; data in DATA_DIR/redis-cluster);
             point the processes at it with REDIS_CLUSTER_NODES=${LOCAL_CLUSTER_NODES}.
             A running cluster is reused and switched to the persistence asked for.
             down: stop only that cluster (plain down stops it too)

Services whose URL is set (TEMPORAL_ADDRESS, REDIS_URL, DATABASE_URL, REDIS_CLUSTER_NODES) are
external and left alone.`;

async function main(): Promise<void> {
  const [command, ...flags] = process.argv.slice(2);
  if (command === undefined || command === '--help' || command === '-h') {
    process.stdout.write(`${HELP}\n`);
    return;
  }
  const config = loadConfigOrExit();
  const log = (line: string): void => void process.stdout.write(`[services] ${line}\n`);
  const unknown = flags.filter((flag) => !['--test', '--cluster'].includes(flag));
  if (unknown.length > 0) {
    process.stderr.write(`unknown option ${unknown.join(' ')}\n${HELP}\n`);
    process.exitCode = 2;
    return;
  }
  const cluster = flags.includes('--cluster');
  const clusterRoot = join(dataDir(config.DATA_DIR), 'redis-cluster');
  const clusterExternal = (process.env.REDIS_CLUSTER_NODES ?? '') !== '';
  if (command === 'up') {
    const started = Date.now();
    const persistence = flags.includes('--test') ? 'none' : 'aof';
    const [addresses, clusterHow] = await Promise.all([
      servicesUp(config, { redisPersistence: persistence, log }),
      cluster && !clusterExternal ? startRedisCluster(clusterRoot, log, { persistence }) : Promise.resolve(undefined),
    ]);
    if (clusterHow !== undefined) log(`redis-cluster: ${clusterHow}`);
    log(`all up in ${Date.now() - started} ms`);
    log(`Temporal gRPC  ${addresses.temporal}`);
    log(`Temporal UI    ${addresses.temporalUi}`);
    log(`Redis          ${addresses.redis}`);
    if (cluster) log(`Redis Cluster  REDIS_CLUSTER_NODES=${clusterExternal ? process.env.REDIS_CLUSTER_NODES : LOCAL_CLUSTER_NODES}`);
    log(`PostgreSQL     ${addresses.postgres}`);
  } else if (command === 'down') {
    if (!cluster) await servicesDown(config, log);
    const stopped = await stopRedisCluster(clusterRoot);
    if (cluster || stopped > 0) log(`redis-cluster: ${stopped > 0 ? `${stopped} node(s) stopped` : 'not running (or not ours)'}`);
  } else {
    process.stderr.write(`unknown command "${command}"\n${HELP}\n`);
    process.exitCode = 2;
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`[services] ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  if (error instanceof AggregateError) for (const e of error.errors) process.stderr.write(`  - ${String(e)}\n`);
  process.exitCode = 1;
});
