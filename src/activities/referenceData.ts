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

interface Entry<T> {
  readonly value: T;
  readonly at: number;
}

export class ReferenceData {
  private readonly carriers = new Map<string, Entry<Carrier | null>>();
  private resolver: Entry<IntervalResolver> | undefined;
  private mode: Entry<PollingMode> | undefined;
  private ingest: Entry<IngestMode> | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly ttlMs = 2000,
  ) {}

  private fresh<T>(entry: Entry<T> | undefined, refresh: boolean): entry is Entry<T> {
    return entry !== undefined && !refresh && Date.now() - entry.at < this.ttlMs;
  }

  async carrier(id: string, refresh = false): Promise<Carrier | null> {
    const cached = this.carriers.get(id);
    if (this.fresh(cached, refresh)) return cached.value;
    const value = await findCarrier(this.pool, id);
    this.carriers.set(id, { value, at: Date.now() });
    return value;
  }

  async intervals(refresh = false): Promise<IntervalResolver> {
    if (this.fresh(this.resolver, refresh)) return this.resolver.value;
    const value = new IntervalResolver(await listPollingConfigs(this.pool, { enabledOnly: true }));
    this.resolver = { value, at: Date.now() };
    return value;
  }

  async pollingMode(refresh = false): Promise<PollingMode> {
    if (this.fresh(this.mode, refresh)) return this.mode.value;
    const value = (await getPollingMode(this.pool)).mode;
    this.mode = { value, at: Date.now() };
    return value;
  }

  async ingestMode(refresh = false): Promise<IngestMode> {
    if (this.fresh(this.ingest, refresh)) return this.ingest.value;
    const value = (await getIngestMode(this.pool)).mode;
    this.ingest = { value, at: Date.now() };
    return value;
  }

  /** Drops everything (after a configuration change made by this process). */
  invalidate(): void {
    this.carriers.clear();
    this.resolver = undefined;
    this.mode = undefined;
    this.ingest = undefined;
  }
}
