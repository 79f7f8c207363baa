/**
 * Per-process, short-lived cache of the reference data every claim round and card execution reads
 * (carrier accounts, polling configs, the global modes). A few seconds of staleness is harmless and
 * saves one PostgreSQL round trip per card; `configChanged` / `refresh` bypass it.
 *
 * Stale-if-error (docs/design.md, 'PostgreSQL and records'): when PostgreSQL cannot be reached, a
 * reload answers the last good value instead of failing, so claim rounds and card executions go on
 * through a database outage (async ingest hands their records to Redis meanwhile). The value is
 * re-read every TTL and the fresh one replaces it as soon as PostgreSQL answers. Going stale and
 * coming back are logged once per cache, not per call. A process that never read a value has none
 * to serve and fails as before.
 */
import type { Pool } from '../db/pool.js';
import { findCarrier } from '../db/carriers.js';
import { listPollingConfigs } from '../db/pollingConfigs.js';
import { getIngestMode, getPollingMode, type IngestMode } from '../db/systemConfig.js';
import type { Carrier } from '../domain/carrier.js';
import { IntervalResolver } from '../domain/pollingConfig.js';
import type { PollingMode } from '../workflow-safe/pollingMode.js';
import { LoadingCache } from './loadingCache.js';
import { isDatabaseUnreachable } from './databaseErrors.js';
import { describeConnectionError } from '../runtime/connectionErrors.js';
import { defaultLogger } from './logger.js';

export interface ReferenceDataOptions {
  readonly ttlMs?: number;
  /** Where the stale / fresh-again lines go (default: {@link defaultLogger} at `warn`). */
  readonly log?: (line: string) => void;
}

export class ReferenceData {
  private readonly carriers: LoadingCache<string, Carrier | null>;
  private readonly resolver: LoadingCache<'all', IntervalResolver>;
  private readonly mode: LoadingCache<'global', PollingMode>;
  private readonly ingest: LoadingCache<'global', IngestMode>;

  constructor(
    private readonly pool: Pool,
    options: ReferenceDataOptions | number = {},
  ) {
    const { ttlMs = 2000, log = (line: string) => defaultLogger().warn(line) } = typeof options === 'number' ? { ttlMs: options } : options;
    // One line per cache when it goes stale (whichever key first) and one when all its keys are fresh again.
    const cacheOf = <K, V>(what: string): LoadingCache<K, V> => {
      const stale = new Set<K>();
      return new LoadingCache<K, V>(ttlMs, {
        staleIfError: isDatabaseUnreachable,
        onStale: (key, isStale, error) => {
          if (isStale) {
            if (stale.size === 0)
              log(`reference data: PostgreSQL unreachable (${describeConnectionError(error)}); serving the last good ${what} until it answers`);
            stale.add(key);
          } else if (stale.delete(key) && stale.size === 0) {
            log(`reference data: ${what} read from PostgreSQL again`);
          }
        },
      });
    };
    this.carriers = cacheOf('carrier accounts');
    this.resolver = cacheOf('polling configs');
    this.mode = cacheOf('polling mode');
    this.ingest = cacheOf('ingest mode');
  }

  carrier(id: string, refresh = false): Promise<Carrier | null> {
    return this.carriers.get(id, () => findCarrier(this.pool, id), refresh);
  }

  intervals(refresh = false): Promise<IntervalResolver> {
    return this.resolver.get('all', async () => new IntervalResolver(await listPollingConfigs(this.pool, { enabledOnly: true })), refresh);
  }

  pollingMode(refresh = false): Promise<PollingMode> {
    return this.mode.get('global', async () => (await getPollingMode(this.pool)).mode, refresh);
  }

  ingestMode(refresh = false): Promise<IngestMode> {
    return this.ingest.get('global', async () => (await getIngestMode(this.pool)).mode, refresh);
  }

  /**
   * Everything is read again at its next use (after a configuration change made by this process).
   * The last good values stay as the fallback for a reload that meets an unreachable database.
   */
  invalidate(): void {
    for (const cache of [this.carriers, this.resolver, this.mode, this.ingest]) cache.expireAll();
  }
}
