/**
 * Per-process, short-lived cache of the reference data every claim round and card execution reads
 * (carrier accounts, polling configs, the global mode). A few seconds of staleness is harmless and
 * saves one PostgreSQL round trip per card; `configChanged` / `refresh` bypass it.
 */
import type { Pool } from '../db/pool.js';
import { findCarrier } from '../db/carriers.js';
import { listPollingConfigs } from '../db/pollingConfigs.js';
import { getIngestMode, getPollingMode, type IngestMode } from '../db/systemConfig.js';
import type { Carrier } from '../domain/carrier.js';
import { IntervalResolver } from '../domain/pollingConfig.js';
import type { PollingMode } from '../common/orchestration.js';
import { LoadingCache } from '../runtime/loadingCache.js';

export class ReferenceData {
  private readonly carriers: LoadingCache<string, Carrier | null>;
  private readonly resolver: LoadingCache<'all', IntervalResolver>;
  private readonly mode: LoadingCache<'global', PollingMode>;
  private readonly ingest: LoadingCache<'global', IngestMode>;

  constructor(
    private readonly pool: Pool,
    ttlMs = 2000,
  ) {
    this.carriers = new LoadingCache(ttlMs);
    this.resolver = new LoadingCache(ttlMs);
    this.mode = new LoadingCache(ttlMs);
    this.ingest = new LoadingCache(ttlMs);
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

  /** Drops everything (after a configuration change made by this process). */
  invalidate(): void {
    for (const cache of [this.carriers, this.resolver, this.mode, this.ingest]) cache.clear();
  }
}
