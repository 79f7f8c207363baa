/**
 * What an operator sees of the ingest: the mode, the backlog (records pending and the oldest's
 * age), the write rate, whether claiming is tightened because of it, and the dead letters.
 */
import type { RedisConnection } from '../redis/connection.js';
import type { Pool } from '../db/pool.js';
import { getIngestMode, type IngestMode } from '../db/systemConfig.js';
import { backlogRatio, type BacklogThresholds } from './pressure.js';
import { IngestStream } from './stream.js';

export interface IngestStatus {
  readonly mode: IngestMode;
  readonly backlog: { readonly records: number; readonly oldestPendingAgeMs: number };
  /** Records committed per second over the last ten seconds (all ingest processes). */
  readonly writeRatePerSec: number;
  /** The backlog is over its thresholds: every account's claiming is tightened. */
  readonly tightened: boolean;
  readonly thresholds: { readonly records: number; readonly maxAgeMs: number };
  readonly deadLetters: number;
}

export async function ingestStatus(input: { pool: Pool; redis: RedisConnection; namespace: string; thresholds: BacklogThresholds }): Promise<IngestStatus> {
  const stream = new IngestStream(input.redis, input.namespace);
  const [mode, backlog, writeRatePerSec, dead] = await Promise.all([
    getIngestMode(input.pool),
    stream.backlog(),
    stream.writeRate(),
    input.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ingest_dead_letter'),
  ]);
  return {
    mode: mode.mode,
    backlog: { records: backlog.records, oldestPendingAgeMs: backlog.oldestAgeMs },
    writeRatePerSec,
    tightened: backlogRatio(backlog, input.thresholds) > 1,
    thresholds: { records: input.thresholds.records, maxAgeMs: input.thresholds.maxAgeMs },
    deadLetters: dead.rows[0]?.n ?? 0,
  };
}
