/**
 * Rebuild from PostgreSQL and the lifecycle writes it works beside, unchanged, on the Redis
 * Cluster: batches over accounts on different masters, the lock, the namespace flushed on every
 * master (SCAN per master), idempotence and concurrent lifecycle traffic.
 */
import './env.js';
import '../db/rebuild.test.js';
import '../db/lifecycle.test.js';
