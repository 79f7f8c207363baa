#!/usr/bin/env bash
# `npm run test:cluster`: the suite against the distributed setup (README.md, 'Cluster setup'),
# test/cluster/*.test.ts.
#
# Every connection of the run goes to the cluster setup:
# - Redis: a local Redis Cluster on 127.0.0.1:7000-7005 (`scripts/services.ts up --test --cluster`,
#   devstack/redisCluster.ts; no persistence), through REDIS_CLUSTER_NODES (set it beforehand
#   to use another cluster: the Redis failover tests then skip, they only kill nodes this project
#   started);
# - Temporal: the multi-service Temporal server on PostgreSQL (`npm run temporal:cluster -- up`,
#   devstack/temporalCluster.ts; frontend 127.0.0.1:7333), through TEMPORAL_ADDRESS. Its
#   binaries are built with Go on first use and cached by version outside the clone.
# PostgreSQL (and the single Redis some fixtures probe) are the shared services. The files that
# change the services under a running system (`disruptive`: nodes or processes killed and
# restarted, the scripts flushed, a node's eviction policy changed for a moment, which a
# connection opened then would refuse) run last, one at a time; the others first, two at a time
# (each isolates itself by namespace, as in npm test).
set -euo pipefail
cd "$(dirname "$0")/.."
# Node 24 (.node-version): installed into .tools/ when the machine's Node is older.
source scripts/use-node.sh
if [ ! -x node_modules/.bin/tsx ]; then npm ci; fi
began=$(date +%s)
# The local Temporal cluster's frontend (DEFAULT_CLUSTER_FRONTEND_PORT in devstack/temporalCluster.ts).
export TEMPORAL_ADDRESS=127.0.0.1:7333
# TEMPORAL_ADDRESS set: services.ts leaves Temporal alone (no dev server needed here).
npx tsx scripts/services.ts up --test --cluster
# The local cluster's nodes (LOCAL_CLUSTER_NODES in devstack/redisCluster.ts).
export REDIS_CLUSTER_NODES="${REDIS_CLUSTER_NODES:-127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005}"
if ! npx tsx scripts/temporal-cluster.ts status >/dev/null 2>&1; then
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/card-poller/temporal-server"
  echo "[test-cluster] starting the Temporal cluster; when its binaries are not in $cache yet, they are built first with Go:" \
    "the first build takes minutes (6.5-15 on 2 cores), later runs reuse them"
fi
npx tsx scripts/temporal-cluster.ts up
npx tsx scripts/migrate.ts
# TypeScript through Node's own type transform, not tsx (scripts/ts-node-options.sh).
source scripts/ts-node-options.sh
echo "[test-cluster] services ready in $(( $(date +%s) - began )) s: TEMPORAL_ADDRESS=$TEMPORAL_ADDRESS REDIS_CLUSTER_NODES=$REDIS_CLUSTER_NODES"
disruptive=(
  test/cluster/connection.test.ts
  test/cluster/failover.test.ts
  test/cluster/pollingFailover.test.ts
  test/cluster/multiProcess.test.ts
  test/cluster/temporalCluster.test.ts
)
mapfile -t files < <(find test/cluster -name '*.test.ts' | sort | grep -v -x -F "${disruptive[@]/#/-e}")
status=0
# testkit/runFiles.ts (as npm test): each failed test with its message also goes to a file, printed
# last, so a log that keeps only its end (a CI record, where this suite runs beside the fault suite)
# still says which cluster test failed and why.
node "${TS_NODE_OPTIONS[@]}" testkit/runFiles.ts --concurrency 2 --file-timeout 900 --failures test-results/cluster-failures.txt "${@}" -- "${files[@]}" || status=$?
node "${TS_NODE_OPTIONS[@]}" testkit/runFiles.ts --concurrency 1 --file-timeout 900 --failures test-results/cluster-disruptive-failures.txt "${@}" -- "${disruptive[@]}" || status=$?
cat test-results/cluster-failures.txt test-results/cluster-disruptive-failures.txt 2>/dev/null || true
exit "$status"
