/**
 * The orchestration on the Redis Cluster, unchanged test files: request-checks through the
 * scheduler (priority lane, cooldown, not-polled types) and a mode switch carrier → legacy →
 * carrier with the namespace flushed on every master and rebuilt from PostgreSQL. Workers,
 * limiter, ingest and rebuild all run on the cluster connection of src/runtime/deps.ts.
 */
import './env.js';
import '../orchestration/requestCheck.test.js';
import '../orchestration/mode.test.js';
