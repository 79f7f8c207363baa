/**
 * Watches the ingest backlog: publishes it as metrics, and raises the `ingest_backlog` alert when
 * it goes over its thresholds and resolves it when it has drained (below half of them).
 *
 * The alert's state lives in Redis, because the backlog usually grows exactly while PostgreSQL
 * cannot be written: the moment it went over is kept there, the alert row is written (with that
 * moment as its opening time) as soon as PostgreSQL takes it, and it is resolved only after it was
 * written — an outage shorter than a monitor tick still leaves its open-then-resolved record.
 * One monitor acts at a time across ingest processes (a short lock); all publish metrics.
 */
import type { RedisConnection } from '../redis/connection.js';
import type { Pool } from '../db/pool.js';
import { openIngestBacklogAlerts, resolveIngestBacklogAlerts } from '../db/alerts.js';
import type { IngestMetrics } from './metrics.js';
import { backlogRatio, type BacklogThresholds } from './pressure.js';
import type { IngestBacklog, IngestStream } from './stream.js';

/** Below this share of the thresholds the backlog counts as drained (hysteresis). */
const DRAINED_RATIO = 0.5;

export interface BacklogMonitorOptions {
  readonly stream: IngestStream;
  readonly redis: RedisConnection;
  readonly pool: Pool;
  readonly thresholds: BacklogThresholds;
  readonly owner: string;
  readonly metrics?: IngestMetrics;
  readonly intervalMs?: number;
  readonly log?: (line: string) => void;
}

/** `open`: over the thresholds (the alert row written); `clear`: drained, nothing open. */
export type AlertPhase = 'clear' | 'open';

export class BacklogMonitor {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private reconciled = false;
  private lastFailure: string | undefined;
  /** The latest backlog this process read (for status without another round trip). */
  last: IngestBacklog = { records: 0, oldestAgeMs: 0 };

  constructor(private readonly options: BacklogMonitorOptions) {}

  start(): void {
    const every = this.options.intervalMs ?? 1000;
    const loop = (): void => {
      if (this.stopped) return;
      this.running = this.tick()
        .then(() => {
          this.lastFailure = undefined;
        })
        .catch((error: unknown) => {
          // A tick cut short by stop() (connections closing) is no failure to report.
          if (this.stopped) return;
          // The same failure every tick of an outage (PostgreSQL away for a minute) is one line.
          const message = error instanceof Error ? error.message : String(error);
          if (message !== this.lastFailure) this.options.log?.(`ingest monitor: ${message}`);
          this.lastFailure = message;
        })
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(loop, every);
        });
    };
    loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /** One observation: metrics, then (if this process holds the lock) the alert's next step. */
  async tick(): Promise<AlertPhase | undefined> {
    const { stream, redis, pool, thresholds, owner } = this.options;
    const backlog = await stream.backlog();
    this.last = backlog;
    this.options.metrics?.backlog(backlog);
    const lockMs = Math.max(3000, (this.options.intervalMs ?? 1000) * 3);
    const locked =
      (await redis.set(stream.keys.monitorLock, owner, 'PX', lockMs, 'NX')) === 'OK' ||
      ((await redis.get(stream.keys.monitorLock)) === owner && (await redis.pexpire(stream.keys.monitorLock, lockMs)) === 1);
    if (!locked) return undefined;
    const ratio = backlogRatio(backlog, thresholds);
    const state = await redis.hgetall(stream.keys.alert);
    let since = state.since === undefined ? undefined : Number(state.since);
    const written = state.written === '1';
    if (since === undefined) {
      if (ratio > 1) {
        since = Date.now();
        await redis.hset(stream.keys.alert, 'since', since, 'peak', backlog.records);
        this.options.log?.(
          `ingest backlog over its threshold: ${backlog.records} records, oldest ${Math.round(backlog.oldestAgeMs / 1000)} s; claiming is tightened`,
        );
      } else {
        if (!this.reconciled) {
          // An alert left open by a monitor whose Redis state was lost.
          await resolveIngestBacklogAlerts(pool);
          this.reconciled = true;
        }
        return 'clear';
      }
    } else if (backlog.records > Number(state.peak ?? 0)) {
      await redis.hset(stream.keys.alert, 'peak', backlog.records);
    }
    this.reconciled = true;
    if (!written) {
      await openIngestBacklogAlerts(pool, {
        records: Math.max(backlog.records, Number(state.peak ?? 0)),
        threshold: thresholds.records,
        maxAgeMs: thresholds.maxAgeMs,
        openedAt: new Date(since),
      });
      await redis.hset(stream.keys.alert, 'written', 1);
    }
    if (ratio > DRAINED_RATIO) return 'open';
    await resolveIngestBacklogAlerts(pool);
    await redis.del(stream.keys.alert);
    this.options.log?.('ingest backlog drained; claiming back to normal');
    return 'clear';
  }
}
