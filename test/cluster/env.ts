/**
 * Imported first by the cluster test files: points every connection the tests open (test
 * fixtures, runtime deps, child processes) at the cluster setup. `npm run test:cluster` sets
 * REDIS_CLUSTER_NODES and TEMPORAL_ADDRESS itself; run alone, a file uses the local Redis Cluster
 * of `npx tsx scripts/services.ts up --cluster` and the Temporal cluster of
 * `npm run temporal:cluster -- up` (both must be running).
 */
import { LOCAL_CLUSTER_NODES } from '../../devstack/redisCluster.js';
import { DEFAULT_CLUSTER_FRONTEND_PORT } from '../../devstack/temporalCluster.js';

if ((process.env.REDIS_CLUSTER_NODES ?? '') === '') process.env.REDIS_CLUSTER_NODES = LOCAL_CLUSTER_NODES;
if ((process.env.TEMPORAL_ADDRESS ?? '') === '') process.env.TEMPORAL_ADDRESS = `127.0.0.1:${DEFAULT_CLUSTER_FRONTEND_PORT}`;
