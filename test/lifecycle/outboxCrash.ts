/**
 * Child process of test/lifecycle/outbox.test.ts: enables polling of a card through the lifecycle
 * and dies (SIGKILL) at the moment the lifecycle writes Redis, i.e. after its PostgreSQL commit.
 * Env: SCHEMA, NAMESPACE, CARD_ID.
 */
import { loadConfig } from '../../src/config/index.js';
import { createPool } from '../../src/db/pool.js';
import { LifecycleService } from '../../src/lifecycle/service.js';
import { CarrierQueueStore } from '../../src/redis/carrierQueueStore.js';
import { connectRedisFromConfig } from '../../src/redis/connect.js';

const config = loadConfig();
const pool = createPool({ url: config.DATABASE_URL, schema: process.env.SCHEMA!, max: 2, applicationName: 'test-outbox-crash' });
const redis = await connectRedisFromConfig(config, { connectionName: 'test-outbox-crash' });
const real = new CarrierQueueStore(redis, process.env.NAMESPACE);
const die = (): never => {
  process.kill(process.pid, 'SIGKILL');
  throw new Error('unreachable');
};
const store = {
  upsert: die,
  upsertMany: die,
  remove: die,
  removeMany: die,
  requestCheck: real.requestCheck.bind(real),
  laneOf: real.laneOf.bind(real),
  clockNow: () => real.clockNow(),
};
const service = new LifecycleService({ pool, store, redis, namespace: process.env.NAMESPACE! });
await service.enablePolling(process.env.CARD_ID!);
process.stdout.write('the lifecycle event returned without writing Redis\n');
process.exit(3);
