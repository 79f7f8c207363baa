/**
 * The durable hand-off of async ingest: one Redis stream of execution records, read by the ingest
 * workers as one consumer group. A record stays in the stream until the batch holding it has
 * committed (XACK + XDEL together), so the stream's length is exactly the backlog and its first
 * entry's id — Redis' own clock — the oldest pending record's age. Entries a crashed consumer
 * held are taken over by another (XAUTOCLAIM) once idle long enough; a consumer still retrying a
 * batch keeps it by refreshing its idle time (XCLAIM JUSTID).
 *
 * All keys share the `{ingest}` hash tag: one slot, so this runs unchanged on Redis Cluster.
 */
import type { RedisConnection } from '../redis/connection.js';

export const INGEST_GROUP = 'ingest';
/** Seconds of per-second write counters kept for the write rate. */
const RATE_KEEP_SECONDS = 120;

export interface IngestKeys {
  readonly stream: string;
  /** HASH: the backlog alert's state (see src/ingest/monitor.ts). */
  readonly alert: string;
  /** STRING: one monitor at a time across ingest processes. */
  readonly monitorLock: string;
  /** STRING per second: records committed in that second (all ingest processes). */
  written(epochSecond: number): string;
}

export function ingestKeys(namespace: string): IngestKeys {
  const base = `${namespace}poll:{ingest}`;
  return {
    stream: `${base}:records`,
    alert: `${base}:alert`,
    monitorLock: `${base}:monitor`,
    written: (second) => `${base}:written:${second}`,
  };
}

/** The stream holds its maximum of records: the caller writes the record another way. */
export class IngestStreamFull extends Error {
  constructor(
    readonly records: number,
    readonly maxRecords: number,
  ) {
    super(`ingest stream full: ${records} records pending, at most ${maxRecords}`);
    this.name = 'IngestStreamFull';
  }
}

export interface IngestStreamOptions {
  /**
   * Records the stream may hold; a hand-off finding it full fails with {@link IngestStreamFull}
   * (unbounded when absent). Approximate: hand-offs under way at once may each pass the check.
   */
  readonly maxRecords?: number;
}

export interface StreamEntry {
  readonly id: string;
  /** The record's JSON; undefined for an entry deleted while pending (nothing left to write). */
  readonly payload: string | undefined;
}

export interface IngestBacklog {
  /** Records handed over and not yet committed to PostgreSQL. */
  readonly records: number;
  /** Age of the oldest of them (0 when none), on Redis' clock. */
  readonly oldestAgeMs: number;
}

/** Epoch ms encoded in a stream id (`<ms>-<seq>`). */
export function streamIdTime(id: string): number {
  return Number(id.slice(0, id.indexOf('-')));
}

function parseEntries(raw: unknown): StreamEntry[] {
  if (!Array.isArray(raw)) return [];
  const entries: StreamEntry[] = [];
  for (const item of raw) {
    if (!Array.isArray(item) || typeof item[0] !== 'string') continue;
    const fields: unknown = item[1];
    let payload: string | undefined;
    if (Array.isArray(fields)) {
      const at = fields.indexOf('r');
      const value: unknown = at >= 0 ? fields[at + 1] : undefined;
      payload = typeof value === 'string' ? value : undefined;
    }
    entries.push({ id: item[0], payload });
  }
  return entries;
}

const isNoGroup = (error: unknown): boolean => error instanceof Error && error.message.startsWith('NOGROUP');

export class IngestStream {
  readonly keys: IngestKeys;

  constructor(
    private readonly redis: RedisConnection,
    namespace: string,
    private readonly options: IngestStreamOptions = {},
  ) {
    this.keys = ingestKeys(namespace);
  }

  /**
   * Hands one record over; returns its stream id. Never trimmed (no MAXLEN, no MINID): every entry
   * is a record not yet committed, pending at a consumer or not yet read, and a trim would lose
   * it; committed entries are already gone (XDEL in {@link ack}). The length is bounded here
   * instead: a full stream refuses the record ({@link IngestStreamFull}).
   */
  async enqueue(json: string): Promise<string> {
    if (this.options.maxRecords !== undefined) {
      const records = await this.redis.xlen(this.keys.stream);
      if (records >= this.options.maxRecords) throw new IngestStreamFull(records, this.options.maxRecords);
    }
    const id = await this.redis.xadd(this.keys.stream, '*', 'r', json);
    if (id === null) throw new Error('XADD returned no id');
    return id;
  }

  /** Creates the consumer group (and the stream) unless it exists. */
  async ensureGroup(): Promise<void> {
    try {
      await this.redis.xgroup('CREATE', this.keys.stream, INGEST_GROUP, '0', 'MKSTREAM');
    } catch (error) {
      if (!(error instanceof Error && error.message.startsWith('BUSYGROUP'))) throw error;
    }
  }

  /**
   * New records for `consumer`, up to `count`, waiting up to `blockMs` for the first. `connection`
   * must be one of its own: a blocking read holds its connection.
   */
  async read(connection: RedisConnection, consumer: string, count: number, blockMs: number): Promise<StreamEntry[]> {
    const attempt = async (): Promise<StreamEntry[]> => {
      const reply = (await connection.xreadgroup(
        'GROUP',
        INGEST_GROUP,
        consumer,
        'COUNT',
        count,
        'BLOCK',
        blockMs,
        'STREAMS',
        this.keys.stream,
        '>',
      )) as unknown;
      if (!Array.isArray(reply) || reply.length === 0) return [];
      const first: unknown = reply[0];
      return Array.isArray(first) ? parseEntries(first[1]) : [];
    };
    try {
      return await attempt();
    } catch (error) {
      // The group is gone (a Redis that lost its data): recreate it and read again.
      if (!isNoGroup(error)) throw error;
      await this.ensureGroup();
      return attempt();
    }
  }

  /** Takes over up to `count` entries idle for at least `minIdleMs` (their consumer died or stalled). */
  async reclaim(consumer: string, minIdleMs: number, count: number, cursor = '0-0'): Promise<{ entries: StreamEntry[]; cursor: string; deleted: string[] }> {
    const reply = (await this.redis.xautoclaim(this.keys.stream, INGEST_GROUP, consumer, minIdleMs, cursor, 'COUNT', count)) as unknown;
    if (!Array.isArray(reply)) return { entries: [], cursor: '0-0', deleted: [] };
    const deleted: unknown = reply[2];
    return {
      cursor: typeof reply[0] === 'string' ? reply[0] : '0-0',
      entries: parseEntries(reply[1]),
      deleted: Array.isArray(deleted) ? deleted.filter((id): id is string => typeof id === 'string') : [],
    };
  }

  /** Resets the entries' idle time: a batch being retried is not taken over by another consumer. */
  async touch(consumer: string, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.redis.xclaim(this.keys.stream, INGEST_GROUP, consumer, 0, ...ids, 'JUSTID');
  }

  /**
   * Forgets consumers of processes long gone: idle for `idleMs` with nothing pending (entries
   * still pending are taken over first, by {@link reclaim}). Returns how many were removed.
   */
  async pruneConsumers(idleMs: number, keep: string): Promise<number> {
    const reply: unknown = await this.redis.xinfo('CONSUMERS', this.keys.stream, INGEST_GROUP);
    if (!Array.isArray(reply)) return 0;
    let removed = 0;
    for (const item of reply) {
      if (!Array.isArray(item)) continue;
      const fields = new Map<string, unknown>();
      for (let i = 0; i + 1 < item.length; i += 2) fields.set(String(item[i]), item[i + 1]);
      const name = fields.get('name');
      if (typeof name !== 'string' || name === keep) continue;
      if (Number(fields.get('pending')) === 0 && Number(fields.get('idle')) >= idleMs) {
        await this.redis.xgroup('DELCONSUMER', this.keys.stream, INGEST_GROUP, name);
        removed += 1;
      }
    }
    return removed;
  }

  /** After the commit: acknowledged and removed together, and counted for the write rate. */
  async ack(ids: readonly string[], written: number): Promise<void> {
    if (ids.length === 0) return;
    const second = Math.floor(Date.now() / 1000);
    const tx = this.redis
      .multi()
      .xack(this.keys.stream, INGEST_GROUP, ...ids)
      .xdel(this.keys.stream, ...ids);
    if (written > 0) tx.incrby(this.keys.written(second), written).expire(this.keys.written(second), RATE_KEEP_SECONDS);
    const results = await tx.exec();
    const failed = results?.find(([error]) => error !== null);
    if (!results || failed) throw failed?.[0] ?? new Error('ack transaction aborted');
  }

  async backlog(): Promise<IngestBacklog> {
    const results = await this.redis.pipeline().xlen(this.keys.stream).xrange(this.keys.stream, '-', '+', 'COUNT', 1).time().exec();
    if (!results) throw new Error('backlog pipeline aborted');
    for (const [error] of results) if (error) throw error;
    const records = Number(results[0]![1]);
    const oldest = results[1]![1] as [string, string[]][];
    const [seconds, micros] = results[2]![1] as [string, string];
    const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const first = oldest[0];
    return { records, oldestAgeMs: first && records > 0 ? Math.max(0, now - streamIdTime(first[0])) : 0 };
  }

  /** Records committed per second over the last `seconds` full seconds (all ingest processes). */
  async writeRate(seconds = 10): Promise<number> {
    const now = Math.floor(Date.now() / 1000);
    const keys = Array.from({ length: seconds }, (_, i) => this.keys.written(now - 1 - i));
    const values = await this.redis.mget(...keys);
    return values.reduce((sum, v) => sum + Number(v ?? 0), 0) / seconds;
  }
}
