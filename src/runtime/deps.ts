/**
 * The connections and services one process needs (Redis store and limiter, gateway client,
 * PostgreSQL pool, metrics), built once from the configuration and closed together.
 */
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { RedisConnection } from '../redis/connection.js';
import type { Config } from '../config/index.js';
import { connectRedisFromConfig } from '../redis/connect.js';
import { CarrierQueueStore } from '../redis/carrierQueueStore.js';
import { RedisRateLimiter } from '../ratelimit/limiter.js';
import { GatewayClient } from '../gateway/client.js';
import { createPool, type Pool } from '../db/pool.js';
import { ReferenceData } from './referenceData.js';
import { createActivityMetrics, type ActivityMetrics } from './metrics.js';
import { createProcessLogger, type ProcessLogger } from './logger.js';

export interface RuntimeDeps {
  readonly config: Config;
  readonly redis: RedisConnection;
  readonly store: CarrierQueueStore;
  readonly limiter: RedisRateLimiter;
  readonly gateway: GatewayClient;
  readonly pool: Pool;
  readonly reference: ReferenceData;
  readonly registry: Registry;
  readonly metrics: ActivityMetrics;
  /** The process log (JSON lines) for what runs beside the workers. */
  readonly logger: ProcessLogger;
  /**
   * Registers `stop` to run, and be awaited, before the connections close: whatever keeps using
   * them on its own (the ingest's consumer and monitor) ends first, instead of meeting a closed
   * connection.
   */
  beforeClose(stop: () => Promise<void>): void;
  /**
   * Runs what beforeClose registered (close() runs what is left): a process that closes its
   * Temporal connection calls it first, so what uses that connection (a claim round's run starts
   * finishing in the background) ends before it.
   */
  runBeforeClose(): Promise<void>;
  close(): Promise<void>;
}

export interface RuntimeOptions {
  /** Redis key namespace (tests isolate themselves with it). */
  readonly namespace?: string;
  readonly schema?: string;
  /** Overrides DATABASE_POOL_SIZE. */
  readonly poolSize?: number;
  readonly name?: string;
}

export async function createRuntimeDeps(config: Config, options: RuntimeOptions = {}): Promise<RuntimeDeps> {
  const namespace = options.namespace ?? config.REDIS_KEY_PREFIX;
  const logger = createProcessLogger(config, options.name ?? 'card-poller');
  const redis = await connectRedisFromConfig(config, { connectionName: options.name ?? 'card-poller', logger });
  const pool = createPool({
    url: config.DATABASE_URL,
    schema: options.schema ?? config.DATABASE_SCHEMA,
    max: options.poolSize ?? config.DATABASE_POOL_SIZE,
    applicationName: options.name ?? 'card-poller',
    logger,
  });
  // Reference data outlives a PostgreSQL outage (stale-if-error); its two lines per outage go to the process log.
  const reference = new ReferenceData(pool, { log: (line) => logger.warn(line) });
  const stops: Array<() => Promise<void>> = [];
  const runStops = async (): Promise<void> => {
    await Promise.allSettled(stops.splice(0).map((stop) => stop()));
  };
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // Every process on Redis' clock (docs/design.md, 'Leases, claims, one clock'): leases, due times
  // and request stamps compare across hosts.
  const store = new CarrierQueueStore(redis, namespace, { clock: 'redis' });
  const limiter = new RedisRateLimiter({
    redis,
    namespace,
    // The limiter enforces the configured QPS; pushback lowers the effective rate below it.
    qps: async (carrierId, group) => (await reference.carrier(carrierId))?.groups.find((g) => g.name === group)?.qps ?? 1,
  });
  const gateway = new GatewayClient({ baseUrl: config.GATEWAY_URL, maxSockets: config.GATEWAY_MAX_SOCKETS });
  return {
    config,
    redis,
    store,
    limiter,
    gateway,
    pool,
    reference,
    registry,
    metrics: createActivityMetrics(registry),
    logger,
    beforeClose(stop) {
      stops.push(stop);
    },
    runBeforeClose: runStops,
    async close() {
      await runStops();
      gateway.close();
      await Promise.allSettled([pool.end(), redis.quit()]);
    },
  };
}
